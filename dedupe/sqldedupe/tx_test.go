package sqldedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
)

// txEnv is a store and a business table in one database.
type txEnv struct {
	t  *testing.T
	d  sqldedupe.Dialect
	db *sql.DB
	s  *sqldedupe.Store
}

func newTxEnv(t *testing.T, b backend) txEnv {
	db := b.open(t)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return txEnv{t, b.dialect, db, newStore(t, db, b.dialect, sqldedupe.Config{})}
}

func (e txEnv) begin() *sql.Tx {
	e.t.Helper()
	tx, err := e.db.BeginTx(e.t.Context(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return tx
}

// order writes the business row of id inside tx.
func (e txEnv) order(tx *sql.Tx, id string) {
	e.t.Helper()
	if _, err := tx.ExecContext(e.t.Context(), rebind(e.d, "INSERT INTO orders (id) VALUES (?)"), id); err != nil {
		e.t.Fatal(err)
	}
}

func (e txEnv) ordered(id string) bool {
	e.t.Helper()
	var n int
	if err := e.db.QueryRowContext(e.t.Context(), rebind(e.d, "SELECT COUNT(*) FROM orders WHERE id = ?"), id).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n == 1
}

func (e txEnv) finish(tx *sql.Tx, commit bool) {
	e.t.Helper()
	end := tx.Rollback
	if commit {
		end = tx.Commit
	}
	if err := end(); err != nil {
		e.t.Fatal(err)
	}
}

// TestCompleteTx checks that the done record commits with the handler's own
// write or rolls back with it.
func TestCompleteTx(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b)
			ref := dedupe.Ref{Group: "g", Key: "order-1"}

			tk := acquire(t, e.s, ref, long)
			tx := e.begin()
			e.order(tx, ref.Key)
			if err := e.s.CompleteTx(t.Context(), tx, tk, long); err != nil {
				t.Fatal(err)
			}
			e.finish(tx, false)
			if e.ordered(ref.Key) {
				t.Fatal("rolled back order is there")
			}
			// Rolled back: still the claim's, not done.
			if res := claim(t, e.s, ref, long); res.Status != dedupe.InFlight {
				t.Fatalf("Claim after a rolled back CompleteTx = %v, want in flight", res.Status)
			}
			if err := e.s.Release(t.Context(), tk); err != nil {
				t.Fatalf("Release after a rolled back CompleteTx: %v", err)
			}

			tk = acquire(t, e.s, ref, long)
			tx = e.begin()
			e.order(tx, ref.Key)
			if err := e.s.CompleteTx(t.Context(), tx, tk, long); err != nil {
				t.Fatal(err)
			}
			e.finish(tx, true)
			if !e.ordered(ref.Key) {
				t.Fatal("committed order is missing")
			}
			if res := claim(t, e.s, ref, long); res.Status != dedupe.Done {
				t.Fatalf("Claim after a committed CompleteTx = %v, want done", res.Status)
			}

			// A stale ticket fails inside the transaction, which then rolls
			// back its write.
			tx = e.begin()
			err := e.s.CompleteTx(t.Context(), tx, dedupe.Ticket{Ref: ref, Token: "bogus"}, long)
			if !errors.Is(err, dedupe.ErrLeaseLost) {
				t.Errorf("CompleteTx with a stale ticket = %v, want ErrLeaseLost", err)
			}
			e.finish(tx, false)
		})
	}
}

func TestCompleteBatchTx(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b)
			var ts []dedupe.Ticket
			for i := range 3 {
				ts = append(ts, acquire(t, e.s, dedupe.Ref{Group: "g", Key: fmt.Sprint("order-", i)}, long))
			}
			ts = append(ts, dedupe.Ticket{Ref: dedupe.Ref{Group: "g", Key: "order-1"}, Token: "bogus"}, dedupe.Ticket{Ref: dedupe.Ref{Key: "no group"}})
			tx := e.begin()
			errs, err := e.s.CompleteBatchTx(t.Context(), tx, ts, long)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{nil, nil, nil, dedupe.ErrLeaseLost, dedupe.ErrInvalidKey} {
				if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
					t.Errorf("CompleteBatchTx item %d = %v, want %v", i, errs[i], want)
				}
			}
			e.finish(tx, true)
			for _, tk := range ts[:3] {
				if res := claim(t, e.s, tk.Ref, long); res.Status != dedupe.Done {
					t.Errorf("Claim(%q) after CompleteBatchTx = %v, want done", tk.Ref, res.Status)
				}
			}
		})
	}
}

// TestMarkDoneTx checks the claim-free form: the first committed
// transaction wins, a rolled back one leaves nothing behind.
func TestMarkDoneTx(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b)
			ctx := t.Context()
			ref := dedupe.Ref{Group: "g", Key: "order-1"}

			tx := e.begin()
			if err := e.s.MarkDoneTx(ctx, tx, ref, long); err != nil {
				t.Fatal(err)
			}
			e.order(tx, ref.Key)
			e.finish(tx, false)
			if e.ordered(ref.Key) {
				t.Fatal("rolled back order is there")
			}

			tx = e.begin()
			if err := e.s.MarkDoneTx(ctx, tx, ref, long); err != nil {
				t.Fatalf("MarkDoneTx after a rolled back one: %v", err)
			}
			e.order(tx, ref.Key)
			e.finish(tx, true)

			tx = e.begin()
			if err := e.s.MarkDoneTx(ctx, tx, ref, long); !errors.Is(err, sqldedupe.ErrDuplicate) {
				t.Errorf("MarkDoneTx of a done key = %v, want ErrDuplicate", err)
			}
			e.finish(tx, false)
			if res := claim(t, e.s, ref, long); res.Status != dedupe.Done {
				t.Errorf("Claim after MarkDoneTx = %v, want done", res.Status)
			}

			held := dedupe.Ref{Group: "g", Key: "held"}
			acquire(t, e.s, held, long)
			expired := dedupe.Ref{Group: "g", Key: "expired"}
			if err := e.s.Complete(ctx, acquire(t, e.s, expired, long), 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			tx = e.begin()
			errs, err := e.s.MarkDoneBatchTx(ctx, tx, []dedupe.Ref{ref, held, expired, {Key: "no group"}, {Group: "g", Key: "new"}}, long)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{sqldedupe.ErrDuplicate, dedupe.ErrInFlight, nil, dedupe.ErrInvalidKey, nil} {
				if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
					t.Errorf("MarkDoneBatchTx item %d = %v, want %v", i, errs[i], want)
				}
			}
			e.finish(tx, true)
			for _, r := range []dedupe.Ref{expired, {Group: "g", Key: "new"}} {
				if res := claim(t, e.s, r, long); res.Status != dedupe.Done {
					t.Errorf("Claim(%q) after MarkDoneBatchTx = %v, want done", r, res.Status)
				}
			}
		})
	}
}

// TestMarkDoneTxRace marks one key from two transactions at once: the second
// waits for the first and fails if it committed, succeeds if it rolled back.
func TestMarkDoneTxRace(t *testing.T) {
	for _, b := range backends {
		for _, commit := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/commit=%v", b.name, commit), func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, b)
				ref := dedupe.Ref{Group: "g", Key: "order-1"}
				first := e.begin()
				if err := e.s.MarkDoneTx(t.Context(), first, ref, long); err != nil {
					t.Fatal(err)
				}
				second := make(chan error, 1)
				go func() {
					tx, err := e.db.BeginTx(context.Background(), nil)
					if err != nil {
						second <- err
						return
					}
					defer tx.Rollback()
					second <- e.s.MarkDoneTx(context.Background(), tx, ref, long)
				}()
				select {
				case err := <-second:
					t.Fatalf("second MarkDoneTx returned %v while the first transaction was open", err)
				case <-time.After(100 * time.Millisecond):
				}
				e.finish(first, commit)
				err := <-second
				if commit && !errors.Is(err, sqldedupe.ErrDuplicate) {
					t.Errorf("MarkDoneTx after a committed one = %v, want ErrDuplicate", err)
				}
				if !commit && err != nil {
					t.Errorf("MarkDoneTx after a rolled back one = %v, want success", err)
				}
			})
		}
	}
}

func TestNilTx(t *testing.T) {
	e := newTxEnv(t, backendFor(sqldedupe.SQLite))
	ctx := t.Context()
	ref := dedupe.Ref{Group: "g", Key: "k"}
	tk := acquire(t, e.s, ref, long)
	_, batchErr := e.s.CompleteBatchTx(ctx, nil, []dedupe.Ticket{tk}, long)
	_, markErr := e.s.MarkDoneBatchTx(ctx, nil, []dedupe.Ref{ref}, long)
	for what, err := range map[string]error{
		"CompleteTx":      e.s.CompleteTx(ctx, nil, tk, long),
		"CompleteBatchTx": batchErr,
		"MarkDoneTx":      e.s.MarkDoneTx(ctx, nil, ref, long),
		"MarkDoneBatchTx": markErr,
	} {
		if err == nil || errors.Is(err, dedupe.ErrInvalidKey) {
			t.Errorf("%s with a nil *sql.Tx = %v, want a plain error", what, err)
		}
	}
	if res := claim(t, e.s, ref, long); res.Status != dedupe.InFlight {
		t.Errorf("Claim after the refused calls = %v, want in flight", res.Status)
	}
}
