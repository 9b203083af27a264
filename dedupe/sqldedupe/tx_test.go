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
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

// txEnv is a store and a business table in one database.
type txEnv struct {
	t  *testing.T
	d  sqldedupe.Dialect
	db *sql.DB
	s  *sqldedupe.Store
}

func newTxEnv(t *testing.T, b testdb.Backend) txEnv {
	db := b.Open(t)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return txEnv{t, b.Dialect, db, newStore(t, db, b.Dialect, sqldedupe.Config{})}
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
	if _, err := tx.ExecContext(e.t.Context(), sqldialect.Of(e.d).Rebind("INSERT INTO orders (id) VALUES (?)"), id); err != nil {
		e.t.Fatal(err)
	}
}

func (e txEnv) ordered(id string) bool {
	e.t.Helper()
	var n int
	if err := e.db.QueryRowContext(e.t.Context(), sqldialect.Of(e.d).Rebind("SELECT COUNT(*) FROM orders WHERE id = ?"), id).Scan(&n); err != nil {
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
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
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

// TestCompleteTxErrors completes tickets inside one transaction: each
// answers as Complete would, and the ones that succeeded commit.
func TestCompleteTxErrors(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b)
			var ts []dedupe.Ticket
			for i := range 3 {
				ts = append(ts, acquire(t, e.s, dedupe.Ref{Group: "g", Key: fmt.Sprint("order-", i)}, long))
			}
			ended := acquire(t, e.s, dedupe.Ref{Group: "g", Key: "ended"}, 10*time.Millisecond)
			time.Sleep(20 * time.Millisecond)
			ts = append(ts,
				dedupe.Ticket{Ref: dedupe.Ref{Group: "g", Key: "order-1"}, Token: "bogus"},
				ended,
				dedupe.Ticket{Ref: dedupe.Ref{Key: "no group"}})
			tx := e.begin()
			for i, want := range []error{nil, nil, nil, dedupe.ErrLeaseLost, dedupe.ErrLeaseLost, dedupe.ErrInvalidKey} {
				if err := e.s.CompleteTx(t.Context(), tx, ts[i], long); !errors.Is(err, want) || (want == nil && err != nil) {
					t.Errorf("CompleteTx of ticket %d = %v, want %v", i, err, want)
				}
			}
			e.finish(tx, true)
			for _, tk := range ts[:3] {
				if res := claim(t, e.s, tk.Ref, long); res.Status != dedupe.Done {
					t.Errorf("Claim(%q) after CompleteTx = %v, want done", tk.Ref, res.Status)
				}
			}
			if res := claim(t, e.s, ended.Ref, long); res.Status != dedupe.Acquired {
				t.Errorf("Claim of a key whose lease ended before CompleteTx = %v, want acquired", res.Status)
			}
		})
	}
}

// TestCompleteTxLocks completes a key in an open transaction: a claim of
// the key waits for the transaction, then finds the key done if it
// committed and still held by its claim if it rolled back.
func TestCompleteTxLocks(t *testing.T) {
	for _, b := range testdb.Backends {
		for _, commit := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/commit=%v", b.Name, commit), func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, b)
				ref := dedupe.Ref{Group: "g", Key: "order-1"}
				tk := acquire(t, e.s, ref, long)
				first := e.begin()
				if err := e.s.CompleteTx(t.Context(), first, tk, long); err != nil {
					t.Fatal(err)
				}
				second := make(chan dedupe.ClaimResult, 1)
				go func() {
					res, err := e.s.Claim(context.Background(), dedupe.ClaimRequest{Ref: ref, Lease: long})
					if err != nil {
						t.Error(err)
					}
					second <- res
				}()
				select {
				case res := <-second:
					t.Fatalf("Claim returned %v while the completing transaction was open", res.Status)
				case <-time.After(100 * time.Millisecond):
				}
				e.finish(first, commit)
				want := dedupe.InFlight
				if commit {
					want = dedupe.Done
				}
				if res := <-second; res.Status != want {
					t.Errorf("Claim after the transaction ended (commit %v) = %v, want %v", commit, res.Status, want)
				}
			})
		}
	}
}

func TestNilTx(t *testing.T) {
	e := newTxEnv(t, testdb.SQLite)
	ref := dedupe.Ref{Group: "g", Key: "k"}
	tk := acquire(t, e.s, ref, long)
	if err := e.s.CompleteTx(t.Context(), nil, tk, long); err == nil || errors.Is(err, dedupe.ErrInvalidKey) {
		t.Errorf("CompleteTx with a nil *sql.Tx = %v, want a plain error", err)
	}
	if res := claim(t, e.s, ref, long); res.Status != dedupe.InFlight {
		t.Errorf("Claim after the refused call = %v, want in flight", res.Status)
	}
}
