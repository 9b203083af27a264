package redisdedupe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// How a Store claims.
const (
	claimsUnknown int32 = iota
	// claimsNative: SET NX, then reads with PEXPIRETIME, on Redis 7.0 or
	// later.
	claimsNative
	// claimsScript: claimScript, before Redis 7.0.
	claimsScript
)

// native reports whether the store claims by native commands, asking the
// server for its version the first time. Concurrent first claims may each
// ask; a failure is not remembered, so the next claim asks again.
func (s *Store) native(ctx context.Context) (bool, error) {
	switch s.claims.Load() {
	case claimsNative:
		return true, nil
	case claimsScript:
		return false, nil
	}
	v, err := lowestVersion(ctx, s.client)
	if err != nil {
		return false, fmt.Errorf("cannot tell the Redis version (INFO server): %w", err)
	}
	how := claimsScript
	if v >= 7 {
		how = claimsNative
	}
	s.claims.CompareAndSwap(claimsUnknown, how)
	return s.claims.Load() == claimsNative, nil
}

// lowestVersion returns the lowest major version of the servers behind c:
// every master of a cluster and every shard of a ring, which may differ
// while they are upgraded one by one.
func lowestVersion(ctx context.Context, c redis.UniversalClient) (int, error) {
	var (
		mu     sync.Mutex
		lowest = -1
	)
	each := func(ctx context.Context, n *redis.Client) error {
		v, err := version(ctx, n)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if lowest < 0 || v < lowest {
			lowest = v
		}
		return nil
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	default:
		lowest, err = version(ctx, c)
	}
	if err == nil && lowest < 0 {
		err = errors.New("no server answered")
	}
	return lowest, err
}

// version returns the major version in c's INFO server.
func version(ctx context.Context, c redis.Cmdable) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	return majorVersion(info)
}

// majorVersion returns the major version in the redis_version line of an
// INFO answer. Valkey, too, answers the Redis version it is compatible
// with there.
func majorVersion(info string) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "redis_version:")
		if !ok {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		n, err := strconv.Atoi(major)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("redis_version %q is not a version", v)
		}
		return n, nil
	}
	return 0, errors.New("INFO server holds no redis_version")
}
