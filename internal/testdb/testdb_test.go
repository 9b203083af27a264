package testdb_test

import (
	"errors"
	"testing"

	"github.com/idemq/idemq/internal/testdb"
)

// TestHooks runs statements on SQLite through each hook: the counts, a
// lost answer after the statement ran, a statement in a transaction that
// the hook passes over, a refused commit, opaque errors and no insert id.
func TestHooks(t *testing.T) {
	errLost := errors.New("answer lost")
	t.Run("counts", func(t *testing.T) {
		h := &testdb.Hooks{}
		db := testdb.SQLite.OpenWith(t, h)
		db.SetMaxOpenConns(1)
		if _, err := db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		st, err := db.Prepare("INSERT INTO t (k) VALUES (?)")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		before, runs := h.RoundTrips(), h.Runs.Load()
		for k := range 3 {
			if _, err := st.Exec(k); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.RoundTrips() - before; got != 3 {
			t.Errorf("3 runs of a prepared statement: %d round trips", got)
		}
		if got := h.Runs.Load() - runs; got != 3 {
			t.Errorf("3 runs of a prepared statement: %d runs", got)
		}
	})
	t.Run("statement", func(t *testing.T) {
		var lose, saw bool
		db := testdb.SQLite.OpenWith(t, &testdb.Hooks{Statement: func(query string) func() error {
			if query == "SELECT 7" {
				saw = true
			}
			if !lose {
				return nil
			}
			return func() error { return errLost }
		}})
		db.SetMaxOpenConns(1)
		if _, err := db.Exec("CREATE TABLE t (k INTEGER)"); err != nil {
			t.Fatal(err)
		}
		lose = true
		if _, err := db.Exec("INSERT INTO t (k) VALUES (1)"); !errors.Is(err, errLost) {
			t.Fatalf("INSERT with its answer lost = %v", err)
		}
		if err := db.QueryRow("SELECT 7").Scan(new(int)); !errors.Is(err, errLost) || !saw {
			t.Fatalf("SELECT with its answer lost = %v (seen %v)", err, saw)
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
			t.Fatalf("in a transaction: %d rows, %v; want the lost INSERT's row, no hook", n, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("commit", func(t *testing.T) {
		db := testdb.SQLite.OpenWith(t, &testdb.Hooks{Commit: func(_, rollback func() error) error {
			if err := rollback(); err != nil {
				return err
			}
			return errLost
		}})
		if _, err := db.Exec("CREATE TABLE t (k INTEGER)"); err != nil {
			t.Fatal(err)
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT INTO t (k) VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); !errors.Is(err, errLost) {
			t.Fatalf("refused Commit = %v", err)
		}
		var n int
		if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
			t.Fatalf("after a refused commit: %d rows, %v", n, err)
		}
	})
	t.Run("opaque and no insert id", func(t *testing.T) {
		db := testdb.SQLite.OpenWith(t, &testdb.Hooks{Opaque: true, NoInsertID: true})
		if _, err := db.Exec("CREATE TABLE t (k INTEGER PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		res, err := db.Exec("INSERT INTO t (k) VALUES (5)")
		if err != nil {
			t.Fatal(err)
		}
		if id, err := res.LastInsertId(); id != 0 || err != nil {
			t.Errorf("LastInsertId = %d, %v; want 0", id, err)
		}
		_, err = db.Exec("INSERT INTO t (k) VALUES (5)")
		if err == nil || errors.Unwrap(err) != nil {
			t.Errorf("duplicate INSERT = %#v, want an error without a chain", err)
		}
	})
}
