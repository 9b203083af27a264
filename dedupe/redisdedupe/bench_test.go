package redisdedupe_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
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
				run(b, goroutines[mode], size, storeCycle(s, size))
			})
		}
		b.Run(mode+"/naive", func(b *testing.B) {
			run(b, goroutines[mode], 1, naiveCycle(client))
		})
	}
}

// A cycle claims and completes size fresh keys, whose names start with
// prefix and end in the numbers from first.
type cycle func(ctx context.Context, prefix string, first int) error

// goroutines is how many consumer goroutines each mode runs.
var goroutines = map[string]int{"serial": 1, "parallel": 8}

// run runs c over size fresh keys at a time, b.N times in all from n
// goroutines, reports the messages per second and returns the messages.
func run(b *testing.B, n, size int, c cycle) int64 {
	ctx := b.Context()
	prefix := rand.Text()
	var next atomic.Int64 // the next unused key number
	one := func() {
		if err := c(ctx, prefix, int(next.Add(int64(size)))-size); err != nil {
			b.Error(err)
		}
	}
	b.ReportAllocs()
	if n == 1 {
		for b.Loop() {
			one()
		}
	} else {
		// RunParallel starts parallelism × GOMAXPROCS goroutines.
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((n + procs - 1) / procs)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
	}
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "msgs/s")
	return next.Load()
}

// storeCycle claims size keys through s and completes them: with Claim and
// Complete for one key, with ClaimBatch and CompleteBatch for more.
func storeCycle(s dedupe.Store, size int) cycle {
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
		res, errs, err := dedupe.ClaimBatch(ctx, s, reqs)
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
		errs, err = dedupe.CompleteBatch(ctx, s, tickets, benchRetention)
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
