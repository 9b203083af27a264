package redisidgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
)

// BenchmarkLeaser measures the latency of Renew and of Acquire plus Release,
// each taking turns with a PING on the same client, the floor of one round
// trip, reported as the peer metric ping-ns/op: the bench table's ratio is
// then the call's cost in round trips.
func BenchmarkLeaser(b *testing.B) {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer client.Close()
	l, err := redisidgen.New(client, redisidgen.Config{Pool: "bench-leaser", Size: 1024, Lease: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Create(ctx); err != nil {
		b.Fatal(err)
	}
	req := idgen.LeaseRequest{MaxNode: 1023, Owner: "bench"}
	lease, err := l.Acquire(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(ctx, lease, time.Now())
	calls := []struct {
		name string
		call func() error
	}{
		{"idemq-renew", func() error {
			var err error
			lease, err = l.Renew(ctx, lease, time.Now())
			return err
		}},
		{"idemq-acquire+release", func() error {
			other, err := l.Acquire(ctx, req)
			if err != nil {
				return err
			}
			return l.Release(ctx, other, time.Now())
		}},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			var spent, ping time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := client.Ping(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				spent, ping, n = spent+mid.Sub(start), ping+time.Since(mid), n+1
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(float64(ping.Nanoseconds())/float64(n), "ping-ns/op")
		})
	}
}
