package redisidgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/idbench"
)

// BenchmarkLeaser measures the latency of Renew and of Acquire plus Release,
// each taking turns with a PING on the same client, the floor of one round
// trip, reported as the peer metric ping-ns/op: the bench table's ratio is
// then the call's cost in round trips.
func BenchmarkLeaser(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()
	l, err := redisidgen.New(client, redisidgen.Config{Pool: "bench-leaser", Size: 1024, Lease: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Create(context.Background()); err != nil {
		b.Fatal(err)
	}
	idbench.Leaser(b, "", l, "ping", func(ctx context.Context) error { return client.Ping(ctx).Err() })
}
