package redisidgen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
)

// TestLease checks the sender's one call: two processes' generators hold
// two nodes of the pool, each released on Close, and a missing setting is
// refused with an error that names it.
func TestLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := newClient(t, redisAddr)
	const pool = "lease-one-call"
	if err := createPool(redisidgen.Config{Pool: pool, Size: 1024}); err != nil {
		t.Fatal(err)
	}
	a, err := redisidgen.Lease(ctx, c, pool)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisidgen.Lease(ctx, c, pool)
	if err != nil {
		t.Fatal(err)
	}
	if a.Node() == b.Node() {
		t.Fatalf("two leases share node %d", a.Node())
	}
	l := newLeaser(t, c, redisidgen.Config{Pool: pool, Size: 1024})
	held := func() int {
		leases, err := l.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(leases)
	}
	if n := held(); n != 2 {
		t.Fatalf("%d leases held, want 2", n)
	}
	for _, g := range []interface{ Close() error }{a, b} {
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := held(); n != 0 {
		t.Fatalf("%d leases held after Close, want 0", n)
	}

	if _, err := redisidgen.Lease(ctx, c, ""); err == nil || !strings.Contains(err.Error(), "Pool") {
		t.Errorf("Lease without a pool: %v, want an error naming Pool", err)
	}
	if _, err := redisidgen.Lease(ctx, nil, pool); err == nil {
		t.Error("Lease without a client succeeded")
	}
	// Redis down: an error at once, naming the pool, not a wait for ctx.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	if _, err := redisidgen.Lease(ctx, dead, pool); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), pool) {
		t.Errorf("Lease with Redis down: %v (ctx %v), want an error naming pool %q", err, ctx.Err(), pool)
	}
}
