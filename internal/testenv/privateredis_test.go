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

func TestPrivateRedisKillAndStart(t *testing.T) {
	r := testenv.StartPrivateRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	}
	if err := r.Kill(); err == nil {
		t.Fatal("a second Kill succeeded")
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k after a kill and start = %q, %v; want the key kept on disk", v, err)
	}
	if err := r.Start(ctx); err == nil {
		t.Fatal("Start of a running server succeeded")
	}
}
