package sqldialect_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
)

func TestParse(t *testing.T) {
	for _, d := range []sqldialect.Dialect{sqldialect.MySQL, sqldialect.Postgres, sqldialect.SQLite} {
		if got, err := sqldialect.Parse(d.String()); got != d || err != nil {
			t.Errorf("Parse(%q) = %v, %v; want %v", d.String(), got, err, d)
		}
		if !sqldialect.Valid(d) {
			t.Errorf("Valid(%v) = false", d)
		}
	}
	if got, err := sqldialect.Parse("postgresql"); got != sqldialect.Postgres || err != nil {
		t.Errorf(`Parse("postgresql") = %v, %v; want postgres`, got, err)
	}
	for _, name := range []string{"", "MySQL", "redis", "sqlite3", "Dialect(1)"} {
		if got, err := sqldialect.Parse(name); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", name, got)
		}
	}
	for _, d := range []sqldialect.Dialect{0, sqldialect.SQLite + 1, -1} {
		if sqldialect.Valid(d) {
			t.Errorf("Valid(%v) = true", d)
		}
	}
	if got := sqldialect.Dialect(7).String(); got != "Dialect(7)" {
		t.Errorf("Dialect(7).String() = %q", got)
	}
}

func TestValidTable(t *testing.T) {
	for name, want := range map[string]bool{
		"idemq_dedupe":           true,
		"_t":                     true,
		"Other_Table9":           true,
		strings.Repeat("a", 48):  true,
		strings.Repeat("a", 49):  false,
		"":                       false,
		"9lives":                 false,
		"a-b":                    false,
		"a b":                    false,
		"a`b":                    false,
		`a"b`:                    false,
		"a.b":                    false,
		"é":                      false,
		"t; DROP TABLE x; --":    false,
		strings.Repeat("_", 100): false,
	} {
		if got := sqldialect.ValidTable(name); got != want {
			t.Errorf("ValidTable(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestMicros(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		time.Nanosecond:                      1,
		time.Microsecond:                     1,
		time.Microsecond + time.Nanosecond:   2,
		time.Second:                          1e6,
		72 * time.Hour:                       72 * 3600 * 1e6,
		999*time.Microsecond + 1:             1000,
		time.Duration(1<<63 - 1):             (1<<63-1)/1000 + 1,
		2*time.Microsecond - time.Nanosecond: 2,
	} {
		if got := sqldialect.Micros(d); got != want {
			t.Errorf("Micros(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestRebind(t *testing.T) {
	const q = "SELECT a FROM t WHERE b = ? AND c IN (?, ?)"
	for d, want := range map[sqldialect.Dialect]string{
		sqldialect.MySQL:    q,
		sqldialect.SQLite:   q,
		sqldialect.Postgres: "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)",
	} {
		if got := sqldialect.Of(d).Rebind(q); got != want {
			t.Errorf("%v: Rebind = %q, want %q", d, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	for d, want := range map[sqldialect.Dialect]string{
		sqldialect.MySQL:    "`Orders`",
		sqldialect.SQLite:   `"Orders"`,
		sqldialect.Postgres: `"Orders"`,
	} {
		if got := sqldialect.Of(d).Quote("Orders"); got != want {
			t.Errorf("%v: Quote = %s, want %s", d, got, want)
		}
	}
}

// mysqlError looks like go-sql-driver/mysql's errors.
type mysqlError struct {
	number uint16
	state  string
}

func (e *mysqlError) Error() string {
	if e.state == "" {
		return fmt.Sprintf("Error %d: message", e.number)
	}
	return fmt.Sprintf("Error %d (%s): message", e.number, e.state)
}

// pgError looks like pgx's errors.
type pgError struct{ state string }

func (e *pgError) Error() string    { return "ERROR: message (SQLSTATE " + e.state + ")" }
func (e *pgError) SQLState() string { return e.state }

func TestRolledBack(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"MySQLDeadlock", &mysqlError{1213, "40001"}, true},
		{"MySQLDeadlockWithoutState", &mysqlError{1213, ""}, true},
		{"MySQLDeadlockWrapped", fmt.Errorf("x: %w", &mysqlError{1213, "40001"}), true},
		{"MySQLLockWaitTimeout", &mysqlError{1205, "HY000"}, false},
		{"MySQLDuplicate", &mysqlError{1062, "23000"}, false},
		{"MySQL12130", &mysqlError{12130, "HY000"}, false},
		{"PostgresDeadlock", &pgError{"40P01"}, true},
		{"PostgresSerialization", &pgError{"40001"}, true},
		{"PostgresUnique", &pgError{"23505"}, false},
		{"Plain", errors.New("Deadlock"), false},
		{"Context", context.DeadlineExceeded, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sqldialect.RolledBack(tc.err); got != tc.want {
				t.Errorf("RolledBack(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestRetry checks that work runs again while the database rolls it back
// to break a deadlock, and not after any other error or once ctx ends.
func TestRetry(t *testing.T) {
	deadlock, other := &pgError{"40P01"}, errors.New("connection refused")
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		errs      []error // what each call returns; nil once they run out
		wantCalls int
		wantErr   error
	}{
		{"Success", t.Context(), nil, 1, nil},
		{"DeadlocksThenSuccess", t.Context(), []error{deadlock, deadlock}, 3, nil},
		{"OtherError", t.Context(), []error{other, deadlock}, 1, other},
		{"DeadlockThenOther", t.Context(), []error{deadlock, other}, 2, other},
		{"ContextEnded", ended, []error{deadlock, deadlock}, 1, deadlock},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			v, err := sqldialect.Retry(tc.ctx, func() (int, error) {
				calls++
				if calls <= len(tc.errs) {
					return 0, tc.errs[calls-1]
				}
				return 7, nil
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || err == nil && v != 7 {
				t.Errorf("Retry = %d, %v after %d calls, want %v after %d", v, err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}

// TestMissingTable classifies errors by what the drivers report; the
// idemq command's TestMissingTable meets the real ones.
func TestMissingTable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"MySQL", &mysqlError{1146, "42S02"}, true},
		{"MySQLWrapped", fmt.Errorf("list: %w", &mysqlError{1146, "42S02"}), true},
		{"MySQLOtherError", &mysqlError{1045, "28000"}, false},
		{"Postgres", &pgError{"42P01"}, true},
		{"PostgresUndefinedColumn", &pgError{"42703"}, false},
		{"SQLite", errors.New("SQL logic error: no such table: idemq_dedupe (1)"), true},
		{"SQLiteNoColumn", errors.New("SQL logic error: no such column: k (1)"), false},
		{"Context", context.Canceled, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sqldialect.MissingTable(tc.err); got != tc.want {
				t.Errorf("MissingTable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// sqliteError looks like modernc.org/sqlite's errors.
type sqliteError struct{ code int }

func (e *sqliteError) Error() string { return fmt.Sprintf("database is locked (%d)", e.code) }
func (e *sqliteError) Code() int     { return e.code }

// TestLockTimeout classifies errors by what the drivers report;
// sqldedupe's transaction tests meet the real ones.
func TestLockTimeout(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"MySQL", &mysqlError{1205, "HY000"}, true},
		{"MySQLWrapped", fmt.Errorf("claim: %w", &mysqlError{1205, "HY000"}), true},
		{"MySQLDeadlock", &mysqlError{1213, "40001"}, false},
		{"MySQL12050", &mysqlError{12050, "HY000"}, false},
		{"Postgres", &pgError{"55P03"}, true},
		{"PostgresDeadlock", &pgError{"40P01"}, false},
		{"SQLiteBusy", &sqliteError{5}, true},
		{"SQLiteBusySnapshot", &sqliteError{517}, true},
		{"SQLiteLocked", &sqliteError{6}, false},
		{"SQLiteText", errors.New("database is locked"), true},
		{"Context", context.DeadlineExceeded, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sqldialect.LockTimeout(tc.err); got != tc.want {
				t.Errorf("LockTimeout(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
