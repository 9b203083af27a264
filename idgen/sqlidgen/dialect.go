package sqlidgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Dialect selects the SQL a [Leaser] or [WorkerNodes] speaks.
type Dialect int

// Supported databases.
const (
	// MySQL is MySQL 8.0 or later, or MariaDB 10.6 or later, with InnoDB
	// and the github.com/go-sql-driver/mysql driver.
	MySQL Dialect = iota + 1
	// Postgres is PostgreSQL 10 or later (for identity columns), with the
	// pgx driver (github.com/jackc/pgx/v5/stdlib) or another.
	Postgres
	// SQLite is SQLite 3.35 or later (for RETURNING), such as the pure-Go
	// modernc.org/sqlite.
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// valid reports whether d is one of the supported dialects.
func (d Dialect) valid() bool { return d >= MySQL && d <= SQLite }

// clock holds a dialect's expressions for the database's clock. Every time a
// statement stores or compares is the database's own now, read once per
// statement, never the calling process's.
type clock struct {
	// now is the database's current time, in the type of the time columns.
	now string
	// after is now plus a parameter in µs.
	after string
	// micros converts a time column expression to µs since the Unix epoch
	// (NULL stays NULL).
	micros func(string) string
	// greatest is the function that returns the larger of its arguments.
	greatest string
	// never is the earliest time the time columns hold: when a node that
	// was never leased became free.
	never string
}

const (
	// myNow is UTC_TIMESTAMP(6): read once per statement, and free of the
	// session's time zone, which would shift DATETIME values and repeat an
	// hour when daylight saving time ends.
	myNow = "UTC_TIMESTAMP(6)"
	// pgNow is statement_timestamp(): one value per statement
	// (clock_timestamp would change between the columns of one row), and
	// unlike now() it moves on inside a long transaction.
	pgNow = "statement_timestamp()"
	// liteNow is julianday('now') in µs since the Unix epoch: SQLite keeps it
	// fixed for a whole statement, in whole milliseconds (its resolution).
	// julianday rather than unixepoch('subsec') keeps SQLite 3.35 to 3.41
	// working.
	liteNow = "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) * 1000)"
)

func clockOf(d Dialect) clock {
	switch d {
	case MySQL:
		return clock{
			now:   myNow,
			after: "(" + myNow + " + INTERVAL ? MICROSECOND)",
			micros: func(dt string) string {
				return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + dt + ")"
			},
			greatest: "GREATEST",
			never:    "'1000-01-01 00:00:00'",
		}
	case Postgres:
		return clock{
			now:   pgNow,
			after: "(" + pgNow + " + ?::bigint * interval '1 microsecond')",
			micros: func(ts string) string {
				return "(extract(epoch FROM " + ts + ") * 1000000)::bigint"
			},
			greatest: "GREATEST",
			never:    "'-infinity'::timestamptz",
		}
	default:
		return clock{
			now:      liteNow,
			after:    "(" + liteNow + " + ?)",
			micros:   func(us string) string { return us },
			greatest: "max",
			never:    "-9223372036854775808",
		}
	}
}

// rebind rewrites ? placeholders as $1, $2... for PostgreSQL. No statement
// of this package has a ? anywhere else.
func rebind(d Dialect, query string) string {
	if d != Postgres {
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

// quote quotes a table name that Config has validated.
func quote(d Dialect, table string) string {
	if d == MySQL {
		return "`" + table + "`"
	}
	return `"` + table + `"`
}

// micros returns d in µs, rounded up so that a positive d stays positive.
func micros(d time.Duration) int64 { return int64((d-1)/time.Microsecond) + 1 }

// markMicros returns a high-water mark in µs since the Unix epoch, rounded
// up so that the stored mark is never before the true one; 0 for the zero
// time and times before 1970, which raise no mark.
func markMicros(t time.Time) int64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	us := t.UnixMicro()
	if t.After(time.UnixMicro(us)) {
		us++
	}
	return us
}

// markTime is the inverse of markMicros: the zero time for 0.
func markTime(us int64) time.Time {
	if us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// clip returns s as valid UTF-8 of at most n bytes, cut at a character
// boundary: the columns for operators' descriptions are bounded, and MySQL
// refuses text that is not UTF-8.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
