package sqldedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// txEnv is a store and a business table in one database.
type txEnv struct {
	t   *testing.T
	b   testdb.Backend
	dsn string
	db  *sql.DB
	s   *sqldedupe.Store
}

func newTxEnv(t *testing.T, b testdb.Backend, cfg sqldedupe.Config) *txEnv {
	t.Helper()
	dsn := b.DSN(t)
	db := b.OpenDSN(t, dsn)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	cfg.CleanupInterval = -1
	return &txEnv{t, b, dsn, db, newStore(t, db, b.Dialect, cfg)}
}

// impatient returns a second store on e's database whose claims in a
// transaction give up on a key another transaction holds after 200ms (on
// MySQL, whose unit is the second, after 1s): on SQLite through a pool of
// its own whose busy timeout is 200ms.
func (e *txEnv) impatient() *sqldedupe.Store {
	e.t.Helper()
	db := e.db
	if e.b.Dialect == dialect.SQLite {
		db = e.b.OpenDSN(e.t, e.dsn)
		// One connection, so that the pragma holds for every statement.
		db.SetMaxOpenConns(1)
		if _, err := db.ExecContext(e.t.Context(), "PRAGMA busy_timeout = 200"); err != nil {
			e.t.Fatal(err)
		}
	}
	return newStore(e.t, db, e.b.Dialect, sqldedupe.Config{LockTimeout: 200 * time.Millisecond, CleanupInterval: -1})
}

func (e *txEnv) begin(s *sqldedupe.Store) *sql.Tx {
	e.t.Helper()
	tx, err := s.BeginTx(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return tx
}

// claimTx claims ref in tx, for retention, and fails the test on an error.
func (e *txEnv) claimTx(tx *sql.Tx, ref dedupe.Ref, fp string, retention time.Duration) dedupe.ClaimResult {
	e.t.Helper()
	res, err := e.s.ClaimTx(e.t.Context(), tx, dedupe.Item{Ref: ref, Fingerprint: fp}, retention)
	if err != nil {
		e.t.Fatalf("ClaimTx(%q): %v", ref, err)
	}
	return res
}

// order writes the business row of id inside tx.
func (e *txEnv) order(tx *sql.Tx, id string) {
	e.t.Helper()
	if _, err := tx.ExecContext(e.t.Context(), sqldialect.Of(e.b.Dialect).Rebind("INSERT INTO orders (id) VALUES (?)"), id); err != nil {
		e.t.Fatal(err)
	}
}

func (e *txEnv) ordered(id string) bool {
	e.t.Helper()
	var n int
	if err := e.db.QueryRowContext(e.t.Context(), sqldialect.Of(e.b.Dialect).Rebind("SELECT COUNT(*) FROM orders WHERE id = ?"), id).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n == 1
}

func (e *txEnv) finish(tx *sql.Tx, commit bool) {
	e.t.Helper()
	end := tx.Rollback
	if commit {
		end = tx.Commit
	}
	if err := end(); err != nil {
		e.t.Fatal(err)
	}
}

// free fails unless ref can be claimed, and gives the claim back.
func (e *txEnv) free(ref dedupe.Ref) {
	e.t.Helper()
	if err := testkit.Release(e.t.Context(), e.s, acquire(e.t, e.s, ref, long)); err != nil {
		e.t.Fatal(err)
	}
}

// waitBlocked returns once a statement of another session on e's database
// waits for a row lock: on SQLite, which cannot tell, after 100ms in which
// done stayed open.
func (e *txEnv) waitBlocked(done <-chan dedupe.ClaimResult) {
	e.t.Helper()
	if _, ok := e.b.LockWaits(e.t, e.db); !ok {
		select {
		case res := <-done:
			e.t.Fatalf("the second claim returned %v while the first transaction was open", res.Outcome)
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	testkit.WaitFor(e.t, "the second claim waiting for the first transaction's lock", func() bool {
		n, _ := e.b.LockWaits(e.t, e.db)
		return n > 0
	})
}

// TestClaimTx checks that the key's record commits with the caller's own
// write or rolls back with it, and answers later claims as Claim's would.
func TestClaimTx(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			ref := dedupe.Ref{Group: "g", Key: "order-1"}

			tx := e.begin(e.s)
			res := e.claimTx(tx, ref, "fp000001", long)
			if res.Outcome != dedupe.Acquired || res.Token == "" {
				t.Fatalf("ClaimTx of a fresh key = %+v, want acquired with a token", res)
			}
			e.order(tx, ref.Key)
			e.finish(tx, false)
			if e.ordered(ref.Key) {
				t.Fatal("rolled back order is there")
			}
			// Rolled back: no record at all.
			e.free(ref)

			tx = e.begin(e.s)
			if res := e.claimTx(tx, ref, "fp000001", long); res.Outcome != dedupe.Acquired {
				t.Fatalf("ClaimTx after a rollback = %v, want acquired", res.Outcome)
			}
			e.order(tx, ref.Key)
			e.finish(tx, true)
			if !e.ordered(ref.Key) {
				t.Fatal("committed order is missing")
			}
			if res := claim(t, e.s, ref, long); res.Outcome != dedupe.Suppressed {
				t.Fatalf("Claim after a committed ClaimTx = %v, want done", res.Outcome)
			}
			for _, tc := range []struct {
				fp   string
				want dedupe.Outcome
			}{{"fp000001", dedupe.Suppressed}, {"fp000002", dedupe.Reused}, {"", dedupe.Suppressed}, {"another kind", dedupe.Suppressed}} {
				tx := e.begin(e.s)
				res := e.claimTx(tx, ref, tc.fp, long)
				e.finish(tx, false)
				if res.Outcome != tc.want {
					t.Errorf("ClaimTx of a done key with fingerprint %q = %v, want %v", tc.fp, res.Outcome, tc.want)
				}
				if res.Outcome == dedupe.Suppressed && (res.Remaining <= 0 || res.Remaining > long) {
					t.Errorf("ClaimTx of a done key: remaining %v, want within the retention %v", res.Remaining, long)
				}
			}
		})
	}
}

// TestClaimTxRecords claims in a transaction keys whose records were
// written otherwise: by Claim (a consumer without transactions on the same
// table), or by an earlier transaction whose retention has ended.
func TestClaimTxRecords(t *testing.T) {
	tests := []struct {
		name string
		// write leaves ref's record as the case has it.
		write func(e *txEnv, ref dedupe.Ref)
		want  dedupe.Outcome
	}{
		{"Lease", func(e *txEnv, ref dedupe.Ref) { acquire(e.t, e.s, ref, long) }, dedupe.Busy},
		{"LeaseEnded", func(e *txEnv, ref dedupe.Ref) {
			acquire(e.t, e.s, ref, 10*time.Millisecond)
			time.Sleep(20 * time.Millisecond)
		}, dedupe.Acquired},
		{"Released", func(e *txEnv, ref dedupe.Ref) {
			if err := testkit.Release(e.t.Context(), e.s, acquire(e.t, e.s, ref, long)); err != nil {
				e.t.Fatal(err)
			}
		}, dedupe.Acquired},
		{"Completed", func(e *txEnv, ref dedupe.Ref) {
			if err := testkit.Complete(e.t.Context(), e.s, acquire(e.t, e.s, ref, long), long); err != nil {
				e.t.Fatal(err)
			}
		}, dedupe.Suppressed},
		{"RetentionEnded", func(e *txEnv, ref dedupe.Ref) {
			tx := e.begin(e.s)
			e.claimTx(tx, ref, "", 10*time.Millisecond)
			e.finish(tx, true)
			time.Sleep(20 * time.Millisecond)
		}, dedupe.Acquired},
	}
	for _, b := range testdb.Backends {
		for _, tc := range tests {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newTxEnv(t, b, sqldedupe.Config{})
				ref := dedupe.Ref{Group: "g", Key: "order-1"}
				tc.write(e, ref)
				tx := e.begin(e.s)
				res := e.claimTx(tx, ref, "", long)
				if res.Outcome != tc.want {
					t.Fatalf("ClaimTx = %v, want %v", res.Outcome, tc.want)
				}
				if res.Outcome == dedupe.Busy && (res.Remaining <= 0 || res.Remaining > long) {
					t.Errorf("ClaimTx of a leased key: remaining %v, want within the lease %v", res.Remaining, long)
				}
				if res.Outcome != dedupe.Acquired {
					e.finish(tx, false)
					return
				}
				// A rollback leaves the ended record as it was: still no
				// record for the next claim.
				e.finish(tx, false)
				tx = e.begin(e.s)
				if res := e.claimTx(tx, ref, "", long); res.Outcome != dedupe.Acquired {
					t.Fatalf("ClaimTx after the takeover rolled back = %v, want acquired", res.Outcome)
				}
				e.finish(tx, true)
				if res := claim(t, e.s, ref, long); res.Outcome != dedupe.Suppressed {
					t.Fatalf("Claim after the takeover committed = %v, want done", res.Outcome)
				}
			})
		}
	}
}

// TestClaimTxRefuses asks for keys that cannot be stored, and with
// arguments that cannot work: each is refused with a plain reason, and
// nothing is written.
func TestClaimTxRefuses(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			tx := e.begin(e.s)
			for _, tc := range []struct {
				ref    dedupe.Ref
				fp     string
				reason string
			}{
				{dedupe.Ref{Group: "g"}, "", "empty key"},
				{dedupe.Ref{Key: "k"}, "", "empty group"},
				{dedupe.Ref{Group: "g", Key: strings.Repeat("k", 256)}, "", "key is 256 bytes, limit 255"},
				{dedupe.Ref{Namespace: strings.Repeat("n", 65), Group: "g", Key: "k"}, "", "namespace is 65 bytes, limit 64"},
				{dedupe.Ref{Group: "g", Key: "a\x00b"}, "", "key holds control character U+0000"},
				{dedupe.Ref{Group: "g", Key: "\xff"}, "", "key is not valid UTF-8"},
				{dedupe.Ref{Group: "g", Key: "k"}, strings.Repeat("f", 129), "fingerprint is 129 bytes, limit 128"},
			} {
				_, err := e.s.ClaimTx(t.Context(), tx, dedupe.Item{Ref: tc.ref, Fingerprint: tc.fp}, long)
				if !errors.Is(err, msgkey.ErrInvalid) || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), "sqldedupe: claim") {
					t.Errorf("ClaimTx(%q, fingerprint %q) = %v; want msgkey.ErrInvalid saying %q", tc.ref, tc.fp, err, tc.reason)
				}
			}
			ref := dedupe.Ref{Group: "g", Key: "k"}
			for what, err := range map[string]error{
				"a nil *sql.Tx":  func() error { _, err := e.s.ClaimTx(t.Context(), nil, dedupe.Item{Ref: ref}, long); return err }(),
				"no retention":   func() error { _, err := e.s.ClaimTx(t.Context(), tx, dedupe.Item{Ref: ref}, 0); return err }(),
				"a negative one": func() error { _, err := e.s.ClaimTx(t.Context(), tx, dedupe.Item{Ref: ref}, -time.Second); return err }(),
			} {
				if err == nil || errors.Is(err, msgkey.ErrInvalid) {
					t.Errorf("ClaimTx with %s = %v, want a plain error", what, err)
				}
			}
			cancelled, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := e.s.ClaimTx(cancelled, tx, dedupe.Item{Ref: ref}, long); !errors.Is(err, context.Canceled) {
				t.Errorf("ClaimTx with a cancelled context = %v, want context.Canceled", err)
			}
			// Nothing reached the database: the transaction claims on.
			if res := e.claimTx(tx, ref, "", long); res.Outcome != dedupe.Acquired {
				t.Fatalf("ClaimTx after the refused calls = %v, want acquired", res.Outcome)
			}
			e.finish(tx, false)
			var n int
			if err := e.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+dedupekit.DefaultTable).Scan(&n); err != nil || n != 0 {
				t.Errorf("records after the refused claims and a rollback: %d, %v; want none", n, err)
			}
		})
	}
}

// TestClaimTxWaits claims a key in a transaction while another holds it:
// the claim waits for the first transaction, then finds the key done if
// it committed and free if it rolled back.
func TestClaimTxWaits(t *testing.T) {
	for _, b := range testdb.Backends {
		for _, commit := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/commit=%v", b.Name, commit), func(t *testing.T) {
				t.Parallel()
				// Patient: the second claim must wait for the first, not
				// give up.
				e := newTxEnv(t, b, sqldedupe.Config{LockTimeout: time.Minute})
				ref := dedupe.Ref{Group: "g", Key: "order-1"}
				first := e.begin(e.s)
				if res := e.claimTx(first, ref, "", long); res.Outcome != dedupe.Acquired {
					t.Fatalf("first ClaimTx = %v, want acquired", res.Outcome)
				}
				e.order(first, ref.Key)
				second := make(chan dedupe.ClaimResult, 1)
				go func() {
					res, err := func() (dedupe.ClaimResult, error) {
						// On SQLite, BEGIN IMMEDIATE waits here.
						tx, err := e.s.BeginTx(context.Background())
						if err != nil {
							return dedupe.ClaimResult{}, err
						}
						defer tx.Rollback()
						return e.s.ClaimTx(context.Background(), tx, dedupe.Item{Ref: ref}, long)
					}()
					if err != nil {
						t.Error(err)
					}
					second <- res
				}()
				e.waitBlocked(second)
				e.finish(first, commit)
				want := dedupe.Acquired
				if commit {
					want = dedupe.Suppressed
				}
				if res := <-second; res.Outcome != want {
					t.Errorf("second ClaimTx after the first transaction ended (commit %v) = %v, want %v", commit, res.Outcome, want)
				}
			})
		}
	}
}

// TestClaimTxLockTimeout claims a key that another transaction holds, for
// longer than the lock timeout: the claim gives up with ErrBusy, the
// driver's own error in its chain. The timeout applies to the claim alone.
func TestClaimTxLockTimeout(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := newTxEnv(t, b, sqldedupe.Config{})
			impatient := e.impatient()
			ref := dedupe.Ref{Group: "g", Key: "order-1"}
			holder := e.begin(e.s)
			if res := e.claimTx(holder, ref, "", long); res.Outcome != dedupe.Acquired {
				t.Fatalf("holder's ClaimTx = %v, want acquired", res.Outcome)
			}
			err := func() error {
				tx, err := impatient.BeginTx(t.Context())
				if err != nil {
					return err
				}
				defer tx.Rollback()
				_, err = impatient.ClaimTx(t.Context(), tx, dedupe.Item{Ref: ref}, long)
				return err
			}()
			if !errors.Is(err, dedupe.ErrBusy) || !sqldialect.LockTimeout(err) {
				t.Fatalf("claim of a key held past the lock timeout = %v; want ErrBusy and the driver's lock timeout", err)
			}
			e.finish(holder, false)

			tx := e.begin(impatient)
			defer tx.Rollback()
			before := lockTimeout(t, b.Dialect, tx)
			if res, err := impatient.ClaimTx(t.Context(), tx, dedupe.Item{Ref: ref}, long); err != nil || res.Outcome != dedupe.Acquired {
				t.Fatalf("claim once the holder rolled back = %v, %v; want acquired", res.Outcome, err)
			}
			if after := lockTimeout(t, b.Dialect, tx); after != before {
				t.Errorf("lock timeout of the transaction after the claim = %q, want %q as before it", after, before)
			}
		})
	}
}

// lockTimeout returns the lock timeout of tx's session, "" on SQLite.
func lockTimeout(t *testing.T, d dialect.Dialect, tx *sql.Tx) string {
	t.Helper()
	var q string
	switch d {
	case dialect.MySQL:
		q = "SELECT @@innodb_lock_wait_timeout"
	case dialect.Postgres:
		q = "SHOW lock_timeout"
	default:
		return ""
	}
	var v string
	if err := tx.QueryRowContext(t.Context(), q).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
