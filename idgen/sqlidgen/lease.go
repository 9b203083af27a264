package sqlidgen

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
)

// Lease returns a generator of the default layout ([idgen.Twitter]) on a
// node id leased from the pool named pool, in db's table
// idemq_worker_lease (d is db's dialect, as [New] says), for as
// long as it runs: a sending process's one call for its keys
// (msgkey.FromIDs(gen)). It creates the table if it is missing
// ([Leaser.Migrate]) and waits, as long as ctx allows, for a free node:
// bound ctx. A clock that stands behind the node's last ID by up to a
// second is waited out ([idgen.Wait]); further back, Next fails. The
// generator renews the lease in the background and Close releases it. For
// another layout, table, lease or rollback policy, use [New] and
// [idgen.NewLeased].
func Lease(ctx context.Context, db *sql.DB, d dialect.Dialect, pool string) (*idgen.Generator, error) {
	l, err := New(db, d, Config{Pool: pool, Size: idgen.Twitter.MaxNode() + 1})
	if err != nil {
		return nil, err
	}
	if err := l.Migrate(ctx); err != nil {
		return nil, err
	}
	gen, err := idgen.NewLeased(ctx, l, idgen.Config{Layout: idgen.Twitter, Rollback: idgen.Wait{Max: time.Second}}, idgen.LeaseConfig{Wait: true})
	if err != nil {
		return nil, fmt.Errorf("sqlidgen: lease a node of pool %q: %w", pool, err)
	}
	return gen, nil
}
