package testkit

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// Goroutines runs one b.N times in all from n goroutines: in b.Loop when
// n is 1, through RunParallel otherwise. It reports allocations.
func Goroutines(b *testing.B, n int, one func()) {
	b.ReportAllocs()
	if n == 1 {
		for b.Loop() {
			one()
		}
		return
	}
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((n + procs - 1) / procs)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			one()
		}
	})
}

// ClaimComplete claims items, which must all be free, for lease in one
// Claim, and completes them for retention in one Complete. Its tickets
// go in tickets, which has items' length, so that a benchmark can reuse it.
func ClaimComplete(ctx context.Context, s dedupe.Store, items []dedupe.Item, tickets []dedupe.Ticket, lease, retention time.Duration) error {
	res, errs, err := s.Claim(ctx, items, lease)
	if err != nil {
		return err
	}
	for i, r := range res {
		if errs[i] != nil || r.Outcome != dedupe.Acquired {
			return fmt.Errorf("Claim item %d = %v, %v", i, r.Outcome, errs[i])
		}
		tickets[i] = dedupe.Ticket{Ref: items[i].Ref, Token: r.Token}
	}
	errs, err = s.Complete(ctx, tickets, retention)
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
