package dedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
)

// txStore counts the Guard's calls through a FaultStore and completes in
// "transactions" on the memory store behind it, ignoring tx: enough to
// follow the Guard's bookkeeping, which never looks at tx. Package
// consumer's tests run the real thing on real databases.
type txStore struct {
	*dedupetest.FaultStore
	mem *memdedupe.Store
	// txErr, when set, is CompleteTx's answer.
	txErr error
	// txCalls counts CompleteTx calls.
	txCalls int
}

func (s *txStore) CompleteTx(ctx context.Context, _ *sql.Tx, t dedupe.Ticket, retention time.Duration) error {
	s.txCalls++
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

	s := newTxStore()
	var (
		got dedupe.Ticket
		ok  bool
	)
	if _, err := newGuard(t, s, dedupe.GuardConfig{}).Do(t.Context(), ref, "", func(ctx context.Context) error {
		got, ok = dedupe.TicketFromContext(ctx)
		// Only the owner's token can extend the lease.
		return s.mem.Extend(ctx, got, time.Hour)
	}); err != nil || !ok || got.Ref != ref {
		t.Fatalf("in Do: TicketFromContext = %v, %v; Do = %v", got, ok, err)
	}

	// An unguarded run has no ticket, not even an outer Guard's.
	down := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
	down.Inject(dedupetest.Fault{Ops: dedupetest.OpClaim})
	inner := newGuard(t, down, dedupe.GuardConfig{FailOpen: true})
	outer := newGuard(t, s, dedupe.GuardConfig{})
	if _, err := outer.Do(t.Context(), dedupe.Ref{Group: "g", Key: "outer"}, "", func(ctx context.Context) error {
		out, err := inner.Do(ctx, ref, "", func(ctx context.Context) error {
			got, ok = dedupe.TicketFromContext(ctx)
			return nil
		})
		if out != dedupe.Unguarded {
			return fmt.Errorf("inner Do = %v, %v; want unguarded", out, err)
		}
		return err
	}); err != nil || ok {
		t.Fatalf("unguarded: TicketFromContext = %v, %v; Do = %v", got, ok, err)
	}
}

// TestCompleteTx checks the Guard's side of a completion in the handler's
// transaction: recorded once, and a failed record releases the claim.
func TestCompleteTx(t *testing.T) {
	tests := []struct {
		name  string
		txErr error
		// record says whether fn calls CompleteTx.
		record bool
		// want: whether Do fails, the Guard's own Complete calls, the key
		// after.
		wantFail      bool
		wantCompletes int
		wantAfter     dedupe.Status
	}{{
		name:   "Recorded",
		record: true, wantAfter: dedupe.Done,
	}, {
		name:          "NotRecorded",
		wantCompletes: 1, wantAfter: dedupe.Done,
	}, {
		name:   "LeaseLost",
		record: true, txErr: dedupe.ErrLeaseLost,
		wantFail: true, wantAfter: dedupe.Acquired,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTxStore()
			s.txErr = tt.txErr
			_, err := newGuard(t, s, dedupe.GuardConfig{}).Do(t.Context(), ref, "", func(ctx context.Context) error {
				if !tt.record {
					return nil
				}
				// The transaction rolls back on this error.
				return dedupe.CompleteTx(ctx, nil, s)
			})
			if (err != nil) != tt.wantFail {
				t.Errorf("Do = %v, want failure %v", err, tt.wantFail)
			}
			// A record that failed means a rolled back effect, which must be
			// retried, not acknowledged as an effect that may have doubled.
			if errors.Is(err, dedupe.ErrLeaseLost) {
				t.Errorf("Do = %v, which reads as a success with a lost lease", err)
			}
			if got := s.Calls(dedupetest.OpComplete); got != tt.wantCompletes {
				t.Errorf("Guard called Complete %d times, want %d", got, tt.wantCompletes)
			}
			if got := status(t, s.mem, ""); got != tt.wantAfter {
				t.Errorf("after Do, Claim = %v, want %v", got, tt.wantAfter)
			}
		})
	}
}

func TestCompleteTxOutsideGuard(t *testing.T) {
	s := newTxStore()
	if err := dedupe.CompleteTx(t.Context(), nil, s); err == nil {
		t.Fatal("CompleteTx outside a Guard succeeded")
	}
	if s.txCalls != 0 {
		t.Fatalf("CompleteTx outside a Guard reached the store %d times", s.txCalls)
	}
}
