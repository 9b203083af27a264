package dedupe_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

func TestClaimFromContext(t *testing.T) {
	if tk, ok := ticketOf(t.Context()); ok {
		t.Errorf("ClaimFromContext outside a Guard = %v, true", tk)
	}
	if tx, ok := txOf(t.Context()); ok {
		t.Errorf("ClaimFromContext outside the transactional mode = %v, true", tx)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
			mem := memdedupe.New(memdedupe.Config{})
			items := itemsOf("", keysOf(n)...)
			res := newGuard(t, mem, dedupe.GuardConfig{}).Do(t.Context(), items, func(ctx context.Context, i int) error {
				tk, ok := ticketOf(ctx)
				if !ok || tk.Ref != items[i].Ref {
					return fmt.Errorf("ClaimFromContext = %v, %v; want item %d's", tk, ok, i)
				}
				// A Guard runs fn in no transaction (the conformance
				// suite's Features.Tx tests the transactional mode, which
				// does).
				if tx, ok := txOf(ctx); ok {
					return fmt.Errorf("ClaimFromContext under a Guard = %v, true", tx)
				}
				// Contexts derived from fn's carry it too.
				dctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if got, _ := ticketOf(dctx); got != tk {
					return fmt.Errorf("ClaimFromContext of a derived context = %v, want %v", got, tk)
				}
				// It holds the owner's token, which extends the lease (the
				// suite's StaleToken checks that no other does).
				return mem.Extend(ctx, tk, time.Hour)
			})
			for i, r := range res {
				checkResult(t, fmt.Sprint("item ", i), r, dedupe.Completed)
			}
		})
	}
}

// TestClaimFromContextUnguarded runs a handler without a claim, the store
// being down and the guard failing open, inside another guard's handler:
// it sees no ticket, not even the outer guard's, which the outer handler
// still sees afterwards.
func TestClaimFromContextUnguarded(t *testing.T) {
	down := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	down.Inject(testkit.Fault{Ops: testkit.OpClaim})
	inner := newGuard(t, down, dedupe.GuardConfig{FailOpen: true})
	outer := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	outerItems := itemsOf("", "outer")
	res := outer.Do(t.Context(), outerItems, func(ctx context.Context, _ int) error {
		for i, r := range inner.Do(ctx, itemsOf("", keysOf(2)...), func(ctx context.Context, i int) error {
			if tk, ok := ticketOf(ctx); ok {
				return fmt.Errorf("unguarded item %d: ClaimFromContext = %v, true", i, tk)
			}
			return nil
		}) {
			if r.Outcome != dedupe.Unguarded {
				return fmt.Errorf("inner item %d: %v, %v; want unguarded", i, r.Outcome, r.Err)
			}
		}
		if tk, ok := ticketOf(ctx); !ok || tk.Ref != outerItems[0].Ref {
			return fmt.Errorf("outer: ClaimFromContext = %v, %v; want its own", tk, ok)
		}
		return nil
	})
	checkResult(t, "outer", res[0], dedupe.Completed)
}

// ticketOf is the ticket fn's context carries; ok when fn runs under a
// claim.
func ticketOf(ctx context.Context) (dedupe.Ticket, bool) {
	t, _, _ := dedupe.ClaimFromContext(ctx)
	return t, t.Token != ""
}

// txOf is the transaction fn's context carries, in the transactional mode.
func txOf(ctx context.Context) (*sql.Tx, bool) {
	_, tx, _ := dedupe.ClaimFromContext(ctx)
	return tx, tx != nil
}
