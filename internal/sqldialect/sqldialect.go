// Package sqldialect decides, once for every SQL package of idemq and the
// idemq command, how idemq speaks each database: which databases it
// supports and from which version, how a statement names a table and
// numbers its parameters, the database clock that every lease, retention
// and high-water mark is measured by, and what a driver's error means.
// dedupe/sqldedupe and idgen/sqlidgen build their own statements from these
// pieces.
//
// Every time a statement stores or compares is the database's own now, read
// once per statement, never the calling process's: hosts with skewed clocks
// agree. Time columns are DATETIME(6) in UTC on MySQL, timestamptz on
// PostgreSQL and INTEGER microseconds since the Unix epoch on SQLite, and
// durations travel as microseconds ([Micros]).
package sqldialect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/idemq/idemq/dialect"
)

// Dialect is the public [dialect.Dialect], under the name this package's
// functions have always used; the constants are its.
type Dialect = dialect.Dialect

const (
	MySQL    = dialect.MySQL
	Postgres = dialect.Postgres
	SQLite   = dialect.SQLite
)

// Valid reports whether d is one of the supported dialects.
func Valid(d Dialect) bool { return d >= MySQL && d <= SQLite }

// Parse returns the dialect a name stands for: a dialect's String, or
// "postgresql", the other name PostgreSQL's URLs go by.
func Parse(name string) (Dialect, error) {
	switch name {
	case "mysql":
		return MySQL, nil
	case "postgres", "postgresql":
		return Postgres, nil
	case "sqlite":
		return SQLite, nil
	}
	return 0, fmt.Errorf("unknown SQL dialect %q: want mysql, postgres or sqlite", name)
}

// TableRule says which table names [ValidTable] accepts, for messages.
const TableRule = "a letter or underscore, then letters, digits or underscores, at most 48 bytes"

// tableName matches TableRule. 48 bytes leave room for the suffix of an
// index named after the table within every dialect's limit on names
// (PostgreSQL's 63 bytes is the lowest), and the characters need no
// escaping inside [Syntax.Quote]'s quotes.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// ValidTable reports whether name is a table name that every dialect
// accepts as it is, quoted: see [TableRule].
func ValidTable(name string) bool { return tableName.MatchString(name) }

// Micros returns a positive d in microseconds, the unit statements take
// durations in, rounded up so that it stays positive.
func Micros(d time.Duration) int64 { return int64((d-1)/time.Microsecond) + 1 }

// Syntax builds the pieces of one dialect's SQL that statements share.
type Syntax struct{ d Dialect }

// Of returns d's Syntax. d must be [Valid].
func Of(d Dialect) Syntax { return Syntax{d} }

// The database's now in each dialect.
const (
	// myNow is UTC_TIMESTAMP(6): read once per statement, and free of the
	// session's time zone, which would shift DATETIME values and repeat an
	// hour when daylight saving time ends.
	myNow = "UTC_TIMESTAMP(6)"
	// pgNow is statement_timestamp(): one value per statement
	// (clock_timestamp would change between the columns of one row), and
	// unlike now() it moves on inside a caller's long transaction.
	pgNow = "statement_timestamp()"
	// liteNow is julianday('now') in µs since the Unix epoch: SQLite keeps
	// it fixed for a whole statement, in whole milliseconds (its
	// resolution). julianday rather than unixepoch('subsec') keeps SQLite
	// 3.35 to 3.41 working.
	liteNow = "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) * 1000)"
)

// Now is the database's current time, in the type of the time columns.
func (s Syntax) Now() string {
	switch s.d {
	case MySQL:
		return myNow
	case Postgres:
		return pgNow
	}
	return liteNow
}

// After is [Syntax.Now] plus us microseconds, us being an expression of a
// whole number: a parameter or a column.
func (s Syntax) After(us string) string {
	switch s.d {
	case MySQL:
		return "(" + myNow + " + INTERVAL " + us + " MICROSECOND)"
	case Postgres:
		// PostgreSQL would take an untyped parameter for an integer and
		// refuse a bigint.
		return "(" + pgNow + " + CAST(" + us + " AS bigint) * interval '1 microsecond')"
	}
	return "(" + liteNow + " + " + us + ")"
}

// UnixMicros converts t, an expression of a time column's type, to
// microseconds since the Unix epoch; NULL stays NULL.
func (s Syntax) UnixMicros(t string) string {
	switch s.d {
	case MySQL:
		return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + t + ")"
	case Postgres:
		return "(extract(epoch FROM " + t + ") * 1000000)::bigint"
	}
	return t
}

// Never is the earliest time a time column holds.
func (s Syntax) Never() string {
	switch s.d {
	case MySQL:
		return "'1000-01-01 00:00:00'"
	case Postgres:
		return "'-infinity'::timestamptz"
	}
	return "-9223372036854775808"
}

// Greatest returns the larger of a and b.
func (s Syntax) Greatest(a, b string) string {
	if s.d == SQLite {
		return "max(" + a + ", " + b + ")"
	}
	return "GREATEST(" + a + ", " + b + ")"
}

// Quote quotes a name that [ValidTable] accepts, so that PostgreSQL keeps
// its case.
func (s Syntax) Quote(name string) string {
	if s.d == MySQL {
		return "`" + name + "`"
	}
	return `"` + name + `"`
}

// Rebind rewrites the ? placeholders of query as $1, $2, ... for
// PostgreSQL. query holds no ? but its placeholders.
func (s Syntax) Rebind(query string) string {
	if s.d != Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sqlState is how pgx (and lib/pq) report an error's SQLSTATE.
type sqlState interface{ SQLState() string }

// RolledBack reports an error with which the database rolled back a
// statement, or the transaction around it, to break a deadlock or a
// serialization conflict: SQLSTATE class 40 on PostgreSQL, or MySQL's error
// 1213. Work that ran alone can run again; work inside a caller's
// transaction is the caller's to redo.
func RolledBack(err error) bool {
	var coded sqlState
	if errors.As(err, &coded) {
		return strings.HasPrefix(coded.SQLState(), "40")
	}
	return MySQLError(err, 1213)
}

// Retry runs do again while the database rolls it back to break a deadlock
// or a serialization conflict ([RolledBack]) and ctx lasts, so that work
// does not fail because other clients make progress. do must be work that
// runs alone, in autocommitted statements or a transaction of its own: a
// rolled back attempt left nothing behind, and what it committed before
// is done again to the same effect.
//
// It waits a little before each attempt, a random time that doubles up to
// [maxRetryWait]: the transaction that won the deadlock is woken only by
// the rollback, and an attempt sent at once often took the rows first and
// formed the same deadlock again (seen on PostgreSQL under load, where each
// round costs deadlock_timeout, until the caller's context ended).
func Retry[T any](ctx context.Context, do func() (T, error)) (T, error) {
	for wait := minRetryWait; ; wait = min(2*wait, maxRetryWait) {
		v, err := do()
		if err == nil || ctx.Err() != nil || !RolledBack(err) {
			return v, err
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// minRetryWait and maxRetryWait bound [Retry]'s wait before an attempt.
const (
	minRetryWait = 2 * time.Millisecond
	maxRetryWait = 100 * time.Millisecond
)

// LockTimeout reports an error with which a statement gave up waiting for
// a lock that another transaction holds: MySQL's error 1205
// (innodb_lock_wait_timeout ran out; MySQL rolls back the statement, not
// the transaction), PostgreSQL's SQLSTATE 55P03 (lock_timeout), or
// SQLite's SQLITE_BUSY (the connection's busy timeout ran out while
// another connection held the database's one write lock).
func LockTimeout(err error) bool {
	var coded sqlState
	if errors.As(err, &coded) {
		return coded.SQLState() == "55P03"
	}
	// modernc.org/sqlite's errors have Code(), the result code (its low
	// byte the primary code, 5 for SQLITE_BUSY); other drivers say it.
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		return lite.Code()&0xff == sqliteBusy
	}
	return MySQLError(err, 1205) || strings.Contains(err.Error(), "database is locked")
}

// sqliteBusy is SQLite's primary result code SQLITE_BUSY.
const sqliteBusy = 5

// MissingTable reports an error that says a table does not exist:
// PostgreSQL's SQLSTATE 42P01, MySQL's error 1146, or SQLite's "no such
// table".
func MissingTable(err error) bool {
	var coded sqlState
	if errors.As(err, &coded) {
		return coded.SQLState() == "42P01"
	}
	return MySQLError(err, 1146) || strings.Contains(err.Error(), "no such table")
}

// MySQLError reports whether err is MySQL's error number n.
// go-sql-driver/mysql keeps the number in a field that only its own type
// reads, and shows it in the message as "Error 1213 (40001): ...", or
// "Error 1213: ..." without a SQLSTATE.
func MySQLError(err error, n int) bool {
	msg, code := err.Error(), "Error "+strconv.Itoa(n)
	return strings.Contains(msg, code+" (") || strings.Contains(msg, code+":")
}
