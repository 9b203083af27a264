package dedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// txStore counts the Guard's calls through a FaultStore and completes in
// "transactions" on the memory store behind it, ignoring tx: enough to
// follow the Guard's bookkeeping, which never looks at tx. Package
// sqldedupe's tests, and consumer's, run the real thing on real databases.
type txStore struct {
	*dedupetest.FaultStore
	mem *memdedupe.Store
	// txErr, when set, is CompleteTx's answer.
	txErr error
	// txCalls counts CompleteTx calls, which a handler may make from
	// another goroutine.
	txCalls atomic.Int32
}

var _ dedupe.TxCompleter = (*txStore)(nil)

func (s *txStore) CompleteTx(ctx context.Context, _ *sql.Tx, t dedupe.Ticket, retention time.Duration) error {
	s.txCalls.Add(1)
	if s.txErr != nil {
		return s.txErr
	}
	return s.mem.Complete(ctx, t, retention)
}

func newTxStore() *txStore {
	mem := memdedupe.New(memdedupe.Config{})
	return &txStore{FaultStore: dedupetest.NewFaultStore(mem), mem: mem}
}

func TestTicketFromContext(t *testing.T) {
	if tk, ok := dedupe.TicketFromContext(t.Context()); ok {
		t.Errorf("TicketFromContext outside a Guard = %v, true", tk)
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
			s := newTxStore()
			items := itemsOf("", keysOf(n)...)
			res := newGuard(t, s, dedupe.GuardConfig{}).Do(t.Context(), items, func(ctx context.Context, i int) error {
				tk, ok := dedupe.TicketFromContext(ctx)
				if !ok || tk.Ref != items[i].Ref {
					return fmt.Errorf("TicketFromContext = %v, %v; want item %d's", tk, ok, i)
				}
				// Contexts derived from fn's carry it too.
				dctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if got, _ := dedupe.TicketFromContext(dctx); got != tk {
					return fmt.Errorf("TicketFromContext of a derived context = %v, want %v", got, tk)
				}
				// It holds the owner's token: it, and only it, can extend
				// the lease.
				forged := dedupe.Ticket{Ref: tk.Ref, Token: tk.Token + "x"}
				if err := s.mem.Extend(ctx, forged, time.Hour); !errors.Is(err, dedupe.ErrLeaseLost) {
					return fmt.Errorf("Extend with a forged token: %v, want ErrLeaseLost", err)
				}
				return s.mem.Extend(ctx, tk, time.Hour)
			})
			for i, r := range res {
				checkResult(t, fmt.Sprint("item ", i), r, dedupe.Completed)
			}
		})
	}
}

// TestTicketFromContextUnguarded runs a handler without a claim, the store
// being down and the guard failing open, inside another guard's handler:
// it sees no ticket, not even the outer guard's, which the outer handler
// still sees afterwards.
func TestTicketFromContextUnguarded(t *testing.T) {
	down := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	down.Inject(dedupetest.Fault{Ops: opsClaim})
	inner := newGuard(t, down, dedupe.GuardConfig{FailOpen: true})
	outer := newGuard(t, memdedupe.New(memdedupe.Config{}), dedupe.GuardConfig{})
	outerItems := itemsOf("", "outer")
	res := outer.Do(t.Context(), outerItems, func(ctx context.Context, _ int) error {
		for i, r := range inner.Do(ctx, itemsOf("", keysOf(2)...), func(ctx context.Context, i int) error {
			if tk, ok := dedupe.TicketFromContext(ctx); ok {
				return fmt.Errorf("unguarded item %d: TicketFromContext = %v, true", i, tk)
			}
			return nil
		}) {
			if r.Outcome != dedupe.Unguarded {
				return fmt.Errorf("inner item %d: %v, %v; want unguarded", i, r.Outcome, r.Err)
			}
		}
		if tk, ok := dedupe.TicketFromContext(ctx); !ok || tk.Ref != outerItems[0].Ref {
			return fmt.Errorf("outer: TicketFromContext = %v, %v; want its own", tk, ok)
		}
		return nil
	})
	checkResult(t, "outer", res[0], dedupe.Completed)
}

// TestCompleteTx checks the Guard's side of a completion in the handler's
// transaction: recorded once, never completed again, and a failed record
// releases the claim.
func TestCompleteTx(t *testing.T) {
	errCommit := errors.New("test: commit failed")
	tests := []struct {
		name  string
		txErr error
		// fault is injected before Do.
		fault *dedupetest.Fault
		// record says whether fn calls CompleteTx, and async whether from
		// a goroutine of its own; fnErr is what fn returns after a
		// successful CompleteTx (the commit's error).
		record, async bool
		fnErr         error

		want    dedupe.Outcome
		wantErr []error
		// trips counts the Guard's complete and release round trips.
		trips [2]int
		// wantAfter is the key's state after Do; zero skips the check.
		wantAfter dedupe.Status
	}{{
		name:   "Recorded",
		record: true,
		want:   dedupe.Completed, wantAfter: dedupe.Done,
	}, {
		// The Guard's own completion would fail: recorded, it is not
		// tried.
		name:   "RecordedStoreDown",
		record: true, fault: &dedupetest.Fault{Ops: opsComplete | opsRelease},
		want: dedupe.Completed, wantAfter: dedupe.Done,
	}, {
		name:   "RecordedFromAnotherGoroutine",
		record: true, async: true,
		want: dedupe.Completed, wantAfter: dedupe.Done,
	}, {
		name: "NotRecorded",
		want: dedupe.Completed, trips: [2]int{1, 0}, wantAfter: dedupe.Done,
	}, {
		// The record failed, so the transaction rolled back: the effect
		// must be retried, not acknowledged as one that may have doubled.
		name:   "LeaseLost",
		record: true, txErr: fmt.Errorf("test: %w", dedupe.ErrLeaseLost),
		want: dedupe.Failed, wantErr: []error{dedupe.ErrLeaseLost}, trips: [2]int{0, 1}, wantAfter: dedupe.Acquired,
	}, {
		// Recorded, but the commit failed: a failure, released rather than
		// completed. (This fake applied the record anyway: no state check.)
		name:   "CommitFails",
		record: true, fnErr: errCommit,
		want: dedupe.Failed, wantErr: []error{errCommit}, trips: [2]int{0, 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range sizes {
				t.Run(fmt.Sprint("Size", n), func(t *testing.T) {
					s := newTxStore()
					s.txErr = tt.txErr
					if tt.fault != nil {
						s.Inject(*tt.fault)
					}
					items := itemsOf("", keysOf(n)...)
					res := newGuard(t, s, dedupe.GuardConfig{}).Do(t.Context(), items, func(ctx context.Context, _ int) error {
						if !tt.record {
							return nil
						}
						var err error
						if tt.async {
							done := make(chan struct{})
							go func() {
								defer close(done)
								err = dedupe.CompleteTx(ctx, nil, s)
							}()
							<-done
						} else {
							err = dedupe.CompleteTx(ctx, nil, s)
						}
						if err != nil {
							// The transaction rolls back on this error.
							return err
						}
						return tt.fnErr
					})
					for i, r := range res {
						checkResult(t, fmt.Sprint("item ", i), r, tt.want, tt.wantErr...)
					}
					if tt.record && int(s.txCalls.Load()) != n {
						t.Errorf("CompleteTx reached the store %d times, want %d", s.txCalls.Load(), n)
					}
					if got := [2]int{s.Calls(opsComplete), s.Calls(opsRelease)}; got != tt.trips {
						t.Errorf("Guard's complete and release round trips: %v, want %v", got, tt.trips)
					}
					if tt.wantAfter != 0 {
						for i, it := range items {
							if got := statusOf(t, s.mem, it.Ref); got != tt.wantAfter {
								t.Errorf("item %d: after Do, Claim = %v, want %v", i, got, tt.wantAfter)
							}
						}
					}
				})
			}
		})
	}
}

// TestCompleteTxMixedBatch records one item of a batch in its handler's
// transaction while the Guard's own completion of the others fails: the
// recorded item is told apart from those the Guard had to complete.
func TestCompleteTxMixedBatch(t *testing.T) {
	s := newTxStore()
	s.Inject(dedupetest.Fault{Ops: opsComplete})
	items := itemsOf("", keysOf(3)...)
	res := newGuard(t, s, dedupe.GuardConfig{}).Do(t.Context(), items, func(ctx context.Context, i int) error {
		if i == 1 {
			return dedupe.CompleteTx(ctx, nil, s)
		}
		return nil
	})
	checkResult(t, "item 0", res[0], dedupe.Unrecorded, dedupetest.ErrInjected)
	checkResult(t, "item 1", res[1], dedupe.Completed)
	checkResult(t, "item 2", res[2], dedupe.Unrecorded, dedupetest.ErrInjected)
	if got := s.txCalls.Load(); got != 1 {
		t.Errorf("CompleteTx reached the store %d times, want 1", got)
	}
	// The two others, in one batch call and its retry.
	if got := s.Calls(dedupetest.OpCompleteBatch); got != 2 {
		t.Errorf("CompleteBatch called %d times, want 2", got)
	}
	for i, want := range []dedupe.Status{dedupe.InFlight, dedupe.Done, dedupe.InFlight} {
		if got := statusOf(t, s.mem, items[i].Ref); got != want {
			t.Errorf("item %d: after Do, Claim = %v, want %v", i, got, want)
		}
	}
}

// TestCompleteTxNested runs a guard inside another's handler: CompleteTx in
// the inner handler records the inner key, never the outer one, which the
// outer guard completes itself.
func TestCompleteTxNested(t *testing.T) {
	outerStore, innerStore := newTxStore(), newTxStore()
	outer := newGuard(t, outerStore, dedupe.GuardConfig{})
	inner := newGuard(t, innerStore, dedupe.GuardConfig{})
	outerItems, innerItems := itemsOf("", "outer"), itemsOf("", "inner")
	res := outer.Do(t.Context(), outerItems, func(ctx context.Context, _ int) error {
		r := inner.Do(ctx, innerItems, func(ctx context.Context, _ int) error {
			return dedupe.CompleteTx(ctx, nil, innerStore)
		})
		checkResult(t, "inner", r[0], dedupe.Completed)
		return nil
	})
	checkResult(t, "outer", res[0], dedupe.Completed)
	if got := [2]int32{outerStore.txCalls.Load(), innerStore.txCalls.Load()}; got != [2]int32{0, 1} {
		t.Errorf("CompleteTx calls of the outer and inner stores: %v, want [0 1]", got)
	}
	if got := [2]int{outerStore.Calls(opsComplete), innerStore.Calls(opsComplete)}; got != [2]int{1, 0} {
		t.Errorf("Guards' Complete calls on the outer and inner stores: %v, want [1 0]", got)
	}
	if got := statusOf(t, outerStore.mem, outerItems[0].Ref); got != dedupe.Done {
		t.Errorf("outer key after Do: Claim = %v, want done", got)
	}
	if got := statusOf(t, innerStore.mem, innerItems[0].Ref); got != dedupe.Done {
		t.Errorf("inner key after Do: Claim = %v, want done", got)
	}
}

// TestCompleteTxWithoutClaim calls CompleteTx where no guard holds a claim:
// outside any guard, and in a handler that a guard runs unguarded (the store
// down, failing open) inside another guard's handler. It fails without
// writing, and never records the outer guard's key.
func TestCompleteTxWithoutClaim(t *testing.T) {
	s := newTxStore()
	if err := dedupe.CompleteTx(t.Context(), nil, s); err == nil {
		t.Error("CompleteTx outside a Guard succeeded")
	}

	down := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	down.Inject(dedupetest.Fault{Ops: opsClaim})
	inner := newGuard(t, down, dedupe.GuardConfig{FailOpen: true})
	outer := newGuard(t, s, dedupe.GuardConfig{})
	outerItems := itemsOf("", "outer")
	res := outer.Do(t.Context(), outerItems, func(ctx context.Context, _ int) error {
		r := inner.Do(ctx, itemsOf("", "inner"), func(ctx context.Context, _ int) error {
			if err := dedupe.CompleteTx(ctx, nil, s); err == nil {
				t.Error("CompleteTx in an unguarded handler succeeded")
			}
			return nil
		})
		checkResult(t, "inner", r[0], dedupe.Unguarded, dedupetest.ErrInjected)
		return nil
	})
	if got := s.txCalls.Load(); got != 0 {
		t.Errorf("CompleteTx without a claim reached the store %d times", got)
	}
	// Completed by the outer Guard itself, not by the inner handler.
	checkResult(t, "outer", res[0], dedupe.Completed)
	if got := s.Calls(opsComplete); got != 1 {
		t.Errorf("outer Guard called Complete %d times, want 1", got)
	}
}
