package testenv_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/internal/testenv"
)

func TestPrivateRedisRestartLosesData(t *testing.T) {
	r := testenv.StartPrivateRedis(t)
	addr := r.Addr()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Addr() != addr {
		t.Fatalf("address changed on restart: %s, then %s", addr, r.Addr())
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after restart = %d, %v; want 0", n, err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Stop succeeded")
	}
	if err := r.Restart(ctx); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}
