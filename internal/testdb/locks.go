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
// server. On MySQL it counts the writes under way in other sessions too
// (see below): a caller that holds the rows they write knows that they
// wait.
func (b Backend) LockWaits(tb testing.TB, db *sql.DB) (n int, ok bool) {
	tb.Helper()
	var q string
	switch b.Dialect {
	case sqldialect.MySQL:
		// MariaDB 10.11 does not always list a waiting transaction in
		// innodb_trx: a claim that waited a minute for a row another
		// transaction had inserted was in neither innodb_trx nor
		// innodb_lock_waits, its session in the processlist executing,
		// state Update. A write under way in another session counts too:
		// while the caller's transaction holds the row it writes, it
		// waits.
		q = `SELECT COUNT(*) FROM information_schema.processlist p
LEFT JOIN information_schema.innodb_trx t ON t.trx_mysql_thread_id = p.id
WHERE p.db = DATABASE() AND p.id <> CONNECTION_ID()
AND (t.trx_state = 'LOCK WAIT' OR (p.command IN ('Query', 'Execute') AND p.state = 'Update'))`
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
