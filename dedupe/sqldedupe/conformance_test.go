package sqldedupe_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

func TestConformance(t *testing.T) {
	for _, b := range append(testdb.Backends, testdb.MySQLOptions) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			// One database per dialect: the suite keeps its tests apart
			// by group, and a store per subtest shares it.
			dsn := b.DSN(t)
			db := b.OpenDSN(t, dsn)
			dedupetest.RunConformanceTests(t, func(t *testing.T) dedupe.Store {
				return newStore(t, db, b.Dialect, sqldedupe.Config{})
			}, dedupetest.Features{Inspector: true, Tx: txDatabase(t, b, dsn, db), LostAnswer: lostAnswer(b), Unreachable: unreachable(b)})
		})
	}
}

// unreachable returns the suite's store on b's dialect whose database
// cannot be reached (SQLite, a file, always can). New does not connect.
func unreachable(b testdb.Backend) func(t *testing.T) (dedupe.Store, string, string) {
	dsn := map[dialect.Dialect]string{
		dialect.MySQL:    "root@tcp(127.0.0.1:1)/idemq?timeout=1s",
		dialect.Postgres: "postgres://postgres@127.0.0.1:1/idemq?connect_timeout=1",
	}[b.Dialect]
	if dsn == "" {
		return nil
	}
	return func(t *testing.T) (dedupe.Store, string, string) {
		db, err := sql.Open(b.Driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sqldedupe.New(db, b.Dialect, sqldedupe.Config{CleanupInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(); db.Close() })
		return s, "sqldedupe", "127.0.0.1:1"
	}
}

// lostAnswer returns the suite's store on b whose statements' answers can
// be lost after the database ran them, as a dropped connection loses
// them: database/sql then sends the statement again on another
// connection.
func lostAnswer(b testdb.Backend) func(t *testing.T) (dedupe.Store, func(string) func() bool) {
	return func(t *testing.T) (dedupe.Store, func(string) func() bool) {
		var lose atomic.Bool
		db := b.OpenWith(t, &testdb.Hooks{Statement: func(string) func() error {
			if !lose.CompareAndSwap(true, false) {
				return nil
			}
			return func() error { return driver.ErrBadConn }
		}})
		return newStore(t, db, b.Dialect, sqldedupe.Config{}), func(string) func() bool {
			lose.Store(true)
			return func() bool { return !lose.Load() }
		}
	}
}

// txDatabase is the suite's view of db, with a table of orders for its
// business rows.
func txDatabase(t *testing.T, b testdb.Backend, dsn string, db *sql.DB) *dedupetest.TxDatabase {
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	syntax := sqldialect.Of(b.Dialect)
	return &dedupetest.TxDatabase{
		Insert: func(ctx context.Context, tx *sql.Tx, id string) error {
			_, err := tx.ExecContext(ctx, syntax.Rebind("INSERT INTO orders (id) VALUES (?)"), id)
			return err
		},
		Count: func(t *testing.T, id string) int {
			var n int
			if err := db.QueryRowContext(t.Context(), syntax.Rebind("SELECT COUNT(*) FROM orders WHERE id = ?"), id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		// Gives up after 200ms (on MySQL, whose unit is the second, after
		// 1s): on SQLite through a pool of its own whose busy timeout is
		// 200ms.
		Impatient: func(t *testing.T) dedupe.Store {
			db := db
			if b.Dialect == dialect.SQLite {
				db = b.OpenDSN(t, dsn)
				// One connection, so that the pragma holds for every statement.
				db.SetMaxOpenConns(1)
				if _, err := db.ExecContext(t.Context(), "PRAGMA busy_timeout = 200"); err != nil {
					t.Fatal(err)
				}
			}
			return newStore(t, db, b.Dialect, sqldedupe.Config{LockTimeout: 200 * time.Millisecond, CleanupInterval: -1})
		},
		LockTimedOut: sqldialect.LockTimeout,
		LockWaits:    func(t *testing.T) (int, bool) { return b.LockWaits(t, db) },
		LockTimeout: func(t *testing.T, tx *sql.Tx) string {
			var q string
			switch b.Dialect {
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
		},
	}
}
