package redisdedupe_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
)

// Leases and retention in the benchmarks: short, so that the records of a
// long run expire instead of filling Redis's memory.
const (
	benchLease     = 30 * time.Second
	benchRetention = 5 * time.Second
)

// BenchmarkClaimComplete measures the happy path of a consumer — claim a
// message, then complete it — through the store in batches of 1 and 32, and
// through the naive protocol of dedupe middleware without scripts or batches
// (SET NX to claim, SET to complete: two round trips per message and no
// owner token). Each runs with one consumer goroutine ("serial") and with 8
// ("parallel"), and reports msgs/s; compare them within one run.
func BenchmarkClaimComplete(b *testing.B) {
	client := newClient(b)
	s, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, size := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/idemq-batch=%d", mode, size), func(b *testing.B) {
				run(b, mode, size, storeCycle(s, size))
			})
		}
		b.Run(mode+"/naive", func(b *testing.B) {
			run(b, mode, 1, naiveCycle(client))
		})
	}
}

// A cycle claims and completes size fresh keys, whose names start with
// prefix and end in the numbers from first.
type cycle func(ctx context.Context, prefix string, first int) error

// run runs c over fresh keys b.N times and reports the messages per second.
func run(b *testing.B, mode string, size int, c cycle) {
	ctx := b.Context()
	prefix := rand.Text()
	var next atomic.Int64 // the next unused key number
	one := func() {
		if err := c(ctx, prefix, int(next.Add(int64(size)))-size); err != nil {
			b.Error(err)
		}
	}
	if mode == "serial" {
		for b.Loop() {
			one()
		}
	} else {
		b.SetParallelism(4) // 8 goroutines on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
	}
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "msgs/s")
}

func storeCycle(s *redisdedupe.Store, size int) cycle {
	return func(ctx context.Context, group string, first int) error {
		reqs := make([]dedupe.ClaimRequest, size)
		for i := range reqs {
			reqs[i] = dedupe.ClaimRequest{Ref: dedupe.Ref{Group: group, Key: strconv.Itoa(first + i)}, Lease: benchLease}
		}
		if size == 1 {
			res, err := s.Claim(ctx, reqs[0])
			if err != nil || res.Status != dedupe.Acquired {
				return fmt.Errorf("Claim = %v, %v", res.Status, err)
			}
			return s.Complete(ctx, dedupe.Ticket{Ref: reqs[0].Ref, Token: res.Token}, benchRetention)
		}
		res, errs, err := s.ClaimBatch(ctx, reqs)
		if err != nil {
			return err
		}
		tickets := make([]dedupe.Ticket, size)
		for i, r := range res {
			if errs[i] != nil || r.Status != dedupe.Acquired {
				return fmt.Errorf("ClaimBatch item %d = %v, %v", i, r.Status, errs[i])
			}
			tickets[i] = dedupe.Ticket{Ref: reqs[i].Ref, Token: r.Token}
		}
		errs, err = s.CompleteBatch(ctx, tickets, benchRetention)
		if err != nil {
			return err
		}
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// naiveCycle claims with SET NX and completes with SET.
func naiveCycle(c *redis.Client) cycle {
	return func(ctx context.Context, prefix string, first int) error {
		key := "naive:" + prefix + ":" + strconv.Itoa(first)
		ok, err := c.SetNX(ctx, key, "processing", benchLease).Result()
		if err != nil || !ok {
			return fmt.Errorf("SET NX = %v, %v", ok, err)
		}
		return c.Set(ctx, key, "done", benchRetention).Err()
	}
}
