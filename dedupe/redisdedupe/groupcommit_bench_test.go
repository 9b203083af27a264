package redisdedupe_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/testkit"
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
			counted := &testkit.TripCounter{CompleteClaimer: s}
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
					before := counted.Trips()
					msgs := run(b, client, n, 1, guardCycle(b, counted, cfg.gc))
					b.ReportMetric(float64(counted.Trips()-before)/float64(msgs), "trips/msg")
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
