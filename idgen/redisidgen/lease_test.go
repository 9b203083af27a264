package redisidgen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/redisidgen"
)

// TestLease checks the sender's one call: leasetest.OneCall's checks on a
// pool that exists, a missing client is refused, and with Redis down an
// error naming the pool comes at once, not after the caller's context.
func TestLease(t *testing.T) {
	c := newClient(t, redisAddr)
	const pool = "lease-one-call"
	if err := createPool(redisidgen.Config{Pool: pool, Size: 1024}); err != nil {
		t.Fatal(err)
	}
	l := newLeaser(t, c, redisidgen.Config{Pool: pool, Size: 1024})
	leasetest.OneCall(t, pool, func(ctx context.Context, pool string) (*idgen.Generator, error) {
		return redisidgen.Lease(ctx, c, pool)
	}, func(ctx context.Context) (int, error) {
		leases, err := l.List(ctx)
		return len(leases), err
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := redisidgen.Lease(ctx, nil, pool); err == nil {
		t.Error("Lease without a client succeeded")
	}
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	if _, err := redisidgen.Lease(ctx, dead, pool); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), pool) {
		t.Errorf("Lease with Redis down: %v (ctx %v), want an error naming pool %q", err, ctx.Err(), pool)
	}
}
