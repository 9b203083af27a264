package redisdedupe_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
)

// BenchmarkGroupCommit measures the per-message path of a push consumer —
// a Guard claims one message, then completes it — from 1 and from 20
// handler goroutines: with GuardConfig.GroupCommit, which coalesces the
// goroutines' claims and completions into shared round trips, with it and
// deferred completions (LateFailure, as a consumer runs), and without;
// each on the store's native path and on its script path (as on Redis
// before 7.0); and through the naive SET NX + SET. Each reports msgs/s, and
// the group commit the store round trips it made per message; compare them
// within one run and one goroutine count.
func BenchmarkGroupCommit(b *testing.B) {
	client := newClient(b)
	stores := benchStores(b, client)
	for _, n := range []int{1, 20} {
		for _, p := range paths {
			s := stores[p.name]
			counted := &countedStore{Store: s}
			trips := &counted.trips
			for _, cfg := range []struct {
				name string
				gc   dedupe.GuardConfig
			}{
				// A consumer's: completions deferred.
				{"deferred", dedupe.GuardConfig{GroupCommit: true, LateFailure: func(ref dedupe.Ref, r dedupe.Result) {
					b.Errorf("%s: %v", ref, r.Err)
				}}},
				{"groupcommit", dedupe.GuardConfig{GroupCommit: true}},
			} {
				b.Run(fmt.Sprintf("goroutines=%d/idemq-%s-%s", n, p.name, cfg.name), func(b *testing.B) {
					before := trips.Load()
					msgs := run(b, client, n, 1, guardCycle(b, counted, cfg.gc))
					b.ReportMetric(float64(trips.Load()-before)/float64(msgs), "trips/msg")
				})
			}
			b.Run(fmt.Sprintf("goroutines=%d/idemq-%s", n, p.name), func(b *testing.B) {
				run(b, client, n, 1, guardCycle(b, s, dedupe.GuardConfig{}))
			})
		}
		b.Run(fmt.Sprintf("goroutines=%d/naive", n), func(b *testing.B) {
			run(b, client, n, 1, naiveCycle(client))
		})
	}
}

// guardCycle handles one message through a Guard over s with cfg, its
// lease and retention the benchmarks'. A Guard that defers completions is
// flushed when the benchmark ends.
func guardCycle(b *testing.B, s dedupe.Store, cfg dedupe.GuardConfig) cycle {
	cfg.Lease, cfg.Retention = benchLease, benchRetention
	g, err := dedupe.NewGuard(s, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := g.Flush(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return func(ctx context.Context, group string, first int) error {
		items := []dedupe.Item{{Ref: dedupe.Ref{Group: group, Key: strconv.Itoa(first)}}}
		if r := g.Do(ctx, items, func(context.Context, int) error { return nil })[0]; r.Outcome != dedupe.Completed {
			return fmt.Errorf("Do = %v, %v", r.Outcome, r.Err)
		}
		return nil
	}
}

// countedStore counts the claim and completion round trips of a store:
// completions that ride with a claim count in the claim's.
type countedStore struct {
	*redisdedupe.Store
	trips atomic.Int64
}

func (s *countedStore) Claim(ctx context.Context, items []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	s.trips.Add(1)
	return s.Store.Claim(ctx, items, lease)
}

func (s *countedStore) Complete(ctx context.Context, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	s.trips.Add(1)
	return s.Store.Complete(ctx, ts, retention)
}

func (s *countedStore) CompleteClaim(ctx context.Context, ts []dedupe.Ticket, retention time.Duration, items []dedupe.Item, lease time.Duration) ([]error, error, []dedupe.ClaimResult, []error, error) {
	s.trips.Add(1)
	return s.Store.CompleteClaim(ctx, ts, retention, items, lease)
}
