package redisidgen

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
)

// Lease returns a generator of the default layout ([idgen.Twitter]) on a
// node id leased from the Redis pool named pool for as long as it runs:
// a sending process's one call for its keys (msgkey.FromIDs(gen)). It
// waits, as long as ctx allows, for a free node and for a pool Redis has
// no record of (one lease, see the package documentation): bound ctx. A
// clock that stands behind the node's last ID by up to a second is waited
// out ([idgen.Wait]); further back, Next fails. The generator renews the
// lease in the background and Close releases it. For another layout,
// lease or rollback policy, use [New] and [idgen.NewLeased].
func Lease(ctx context.Context, client redis.UniversalClient, pool string) (*idgen.Generator, error) {
	l, err := New(client, Config{Pool: pool, Size: idgen.Twitter.MaxNode() + 1})
	if err != nil {
		return nil, err
	}
	gen, err := idgen.NewLeased(ctx, l, idgen.Config{Layout: idgen.Twitter, Rollback: idgen.Wait{Max: time.Second}}, idgen.LeaseConfig{Wait: true})
	if err != nil {
		return nil, fmt.Errorf("redisidgen: lease a node of pool %q: %w", pool, err)
	}
	return gen, nil
}
