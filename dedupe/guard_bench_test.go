package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// BenchmarkGuardDo measures the guard's own cost for one message over the
// memory store, whose calls cost little: a claim, the handler (which does
// nothing) and the completion or release. Run with -benchmem; the
// allocations are the guard's and the store's (a token, a record).
func BenchmarkGuardDo(b *testing.B) {
	ctx := context.Background()
	errFail := errors.New("bench: handler failed")
	for _, bb := range []struct {
		name string
		// fresh gives every delivery a key of its own; otherwise all share
		// one, done before the timer starts.
		fresh bool
		fn    func(context.Context, int) error
		want  dedupe.Outcome
	}{
		{"Completed", true, func(context.Context, int) error { return nil }, dedupe.Completed},
		{"Failed", true, func(context.Context, int) error { return errFail }, dedupe.Failed},
		{"Suppressed", false, func(context.Context, int) error { return nil }, dedupe.Suppressed},
	} {
		b.Run(bb.name, func(b *testing.B) {
			g, err := dedupe.NewGuard(memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
			if err != nil {
				b.Fatal(err)
			}
			// Built beforehand, so that the keys' allocations do not count.
			msgs := make([][]dedupe.Item, b.N)
			one := []dedupe.Item{{Ref: dedupe.Ref{Namespace: "bench", Group: "g", Key: "k"}}}
			for i := range msgs {
				msgs[i] = one
				if bb.fresh {
					msgs[i] = []dedupe.Item{{Ref: dedupe.Ref{Namespace: "bench", Group: "g", Key: strconv.Itoa(i)}}}
				}
			}
			if !bb.fresh {
				g.Do(ctx, one, bb.fn)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if res := g.Do(ctx, msgs[i], bb.fn); res[0].Outcome != bb.want {
					b.Fatalf("Do = %v, %v; want %v", res[0].Outcome, res[0].Err, bb.want)
				}
			}
		})
	}
}
