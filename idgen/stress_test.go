package idgen_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

// TestStressRollbacks runs 64 goroutines against one generator while the
// clock keeps stepping back by 1ms to 10s (log-uniformly) and forward
// again, and checks that no ID repeats, under every policy.
func TestStressRollbacks(t *testing.T) {
	tests := []struct {
		name   string
		layout idgen.Layout
		policy idgen.RollbackPolicy
		leased bool // SwitchWorker takes its fresh nodes from a lease pool
	}{
		{"refuse", idgen.Twitter, nil, false},
		{"wait", idgen.Twitter, idgen.Wait{Max: 15 * time.Millisecond}, false},
		{"bump", idgen.RollbackBits, idgen.BumpGeneration{}, false},
		{"borrow", idgen.Twitter, idgen.Borrow{MaxAhead: time.Second}, false},
		{"switch", idgen.Twitter, idgen.SwitchWorker{}, true},
		{"wait else switch", idgen.Twitter, idgen.Wait{Max: 15 * time.Millisecond, Else: idgen.SwitchWorker{}}, true},
		{"bump else wait", idgen.RollbackBits, idgen.BumpGeneration{Else: idgen.Wait{Max: 15 * time.Millisecond}}, false},
	}
	const (
		goroutines = 64
		duration   = 150 * time.Millisecond
		perG       = 5000 // bounds memory and time under -race
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testkit.NewRunningClock(t0)
			cfg := idgen.Config{Layout: tt.layout, Clock: clock, Rollback: tt.policy}
			var g *idgen.Generator
			if tt.leased {
				g = leased(t, newFaultLeaser(t, tt.layout.MaxNode()+1, time.Minute), cfg)
			} else {
				g = testkit.Generator(t, 0, cfg)
			}
			ctx, cancel := context.WithTimeout(context.Background(), duration)
			defer cancel()

			var wg sync.WaitGroup
			wg.Go(func() { injectRollbacks(ctx, clock) })
			got := make([][]idgen.ID, goroutines)
			var failures atomic.Int64
			for w := range goroutines {
				wg.Go(func() {
					buf := make([]idgen.ID, 3)
					for ctx.Err() == nil && len(got[w]) < perG {
						if w%4 == 0 { // some goroutines take batches
							n, err := g.Fill(ctx, buf)
							got[w] = append(got[w], buf[:n]...)
							if err != nil {
								failures.Add(1)
							}
							continue
						}
						id, err := g.Next(ctx)
						if err != nil {
							failures.Add(1)
							continue
						}
						got[w] = append(got[w], id)
					}
				})
			}
			wg.Wait()
			var all []idgen.ID
			for _, ids := range got {
				all = append(all, ids...)
			}
			if len(all) == 0 {
				t.Fatal("no IDs issued")
			}
			testkit.CheckUnique(t, all)
			t.Logf("%d IDs, %d refusals or timeouts", len(all), failures.Load())
		})
	}
}

// injectRollbacks steps the clock back by 1ms to 10s every few hundred
// microseconds, and as often forward by as much or more, until ctx ends.
func injectRollbacks(ctx context.Context, clock *testkit.Clock) {
	for ctx.Err() == nil {
		back := time.Duration(math.Exp(rand.Float64()*math.Log(1e4))) * time.Millisecond
		clock.Add(-back)
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		clock.Add(back + time.Duration(rand.IntN(3))*time.Millisecond)
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
	}
}
