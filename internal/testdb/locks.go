package testdb

import (
	"database/sql"
	"testing"

	"github.com/idemq/idemq/internal/sqldialect"
)

// LockWaits returns how many statements on db's database wait for a row
// lock another transaction holds, so that a test can go on once a claim
// blocks instead of sleeping; ok is false on SQLite, which cannot tell.
// It counts only the sessions of db's database: other tests share the
// server.
func (b Backend) LockWaits(tb testing.TB, db *sql.DB) (n int, ok bool) {
	tb.Helper()
	var q string
	switch b.Dialect {
	case sqldialect.MySQL:
		q = `SELECT COUNT(*) FROM information_schema.innodb_trx t
JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()`
	case sqldialect.Postgres:
		q = `SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND a.datname = current_database()`
	default:
		return 0, false
	}
	if err := db.QueryRowContext(tb.Context(), q).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n, true
}
