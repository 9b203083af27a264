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

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
)

// BenchmarkGroupCommit measures the per-message path of a push consumer —
// claim one message, then complete it — from 1 and from 20 handler
// goroutines: through dedupe.WithGroupCommit over the Store, which
// coalesces the goroutines' claims and completions into shared round
// trips; through the Store alone; and through the naive SET NX + SET. Each
// reports msgs/s, and the group commit the store round trips it made per
// message; compare them within one run and one goroutine count.
func BenchmarkGroupCommit(b *testing.B) {
	client := newClient(b)
	s, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		b.Fatal(err)
	}
	trips := &countingStore{Store: s}
	g := dedupe.WithGroupCommit(trips)
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("goroutines=%d/idemq-groupcommit", n), func(b *testing.B) {
			before := trips.n.Load()
			msgs := runGoroutines(b, n, messageCycle(g))
			b.ReportMetric(float64(trips.n.Load()-before)/float64(msgs), "trips/msg")
		})
		b.Run(fmt.Sprintf("goroutines=%d/idemq", n), func(b *testing.B) {
			runGoroutines(b, n, messageCycle(s))
		})
		b.Run(fmt.Sprintf("goroutines=%d/naive", n), func(b *testing.B) {
			runGoroutines(b, n, naiveCycle(client))
		})
	}
}

// runGoroutines runs c over one fresh key at a time, b.N times, from n
// goroutines, reports the messages per second and returns the messages.
func runGoroutines(b *testing.B, n int, c cycle) int64 {
	ctx := b.Context()
	prefix := rand.Text()
	var next atomic.Int64 // the next unused key number
	one := func() {
		if err := c(ctx, prefix, int(next.Add(1))-1); err != nil {
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

// messageCycle claims one message's key in s and completes it.
func messageCycle(s dedupe.Store) cycle {
	return func(ctx context.Context, group string, first int) error {
		ref := dedupe.Ref{Group: group, Key: strconv.Itoa(first)}
		res, err := s.Claim(ctx, dedupe.ClaimRequest{Ref: ref, Lease: benchLease})
		if err != nil || res.Status != dedupe.Acquired {
			return fmt.Errorf("Claim = %v, %v", res.Status, err)
		}
		return s.Complete(ctx, dedupe.Ticket{Ref: ref, Token: res.Token}, benchRetention)
	}
}

// countingStore counts the round trips made through a Store.
type countingStore struct {
	*redisdedupe.Store
	n atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, req dedupe.ClaimRequest) (dedupe.ClaimResult, error) {
	s.n.Add(1)
	return s.Store.Claim(ctx, req)
}

func (s *countingStore) Complete(ctx context.Context, t dedupe.Ticket, retention time.Duration) error {
	s.n.Add(1)
	return s.Store.Complete(ctx, t, retention)
}

func (s *countingStore) ClaimBatch(ctx context.Context, reqs []dedupe.ClaimRequest) ([]dedupe.ClaimResult, []error, error) {
	s.n.Add(1)
	return s.Store.ClaimBatch(ctx, reqs)
}

func (s *countingStore) CompleteBatch(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	s.n.Add(1)
	return s.Store.CompleteBatch(ctx, ts, retention)
}
