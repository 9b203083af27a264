package redisdedupe_test

import (
	"context"
	"fmt"
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
// trips; through the Store alone; each on the store's native path and on
// its script path (as on Redis before 7.0); and through the naive SET NX +
// SET. Each reports msgs/s, and the group commit the store round trips it
// made per message; compare them within one run and one goroutine count.
func BenchmarkGroupCommit(b *testing.B) {
	client := newClient(b)
	stores := benchStores(b, client)
	for _, n := range []int{1, 20} {
		for _, p := range paths {
			s := stores[p.name]
			trips := &countingStore{Store: s}
			g := dedupe.WithGroupCommit(trips)
			b.Run(fmt.Sprintf("goroutines=%d/idemq-%s-groupcommit", n, p.name), func(b *testing.B) {
				before := trips.n.Load()
				msgs := run(b, client, n, 1, storeCycle(g, 1))
				b.ReportMetric(float64(trips.n.Load()-before)/float64(msgs), "trips/msg")
			})
			b.Run(fmt.Sprintf("goroutines=%d/idemq-%s", n, p.name), func(b *testing.B) {
				run(b, client, n, 1, storeCycle(s, 1))
			})
		}
		b.Run(fmt.Sprintf("goroutines=%d/naive", n), func(b *testing.B) {
			run(b, client, n, 1, naiveCycle(client))
		})
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
