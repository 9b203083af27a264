// Package testdb opens a fresh test database of each SQL backend idemq
// supports, through its real driver or through a wrapper of that driver
// that counts what it sends the server and injects faults ([Hooks]).
//
// The package is test support: import it from _test.go files only.
package testdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"   // "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite"

	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testenv"
)

// Backend is a real database of one dialect.
type Backend struct {
	Name    string
	Dialect sqldialect.Dialect
	Driver  string
	// DSN returns the DSN of a fresh, empty database.
	DSN func(testing.TB) string
}

var (
	// SQLite is a file database in WAL mode, in which readers do not
	// block the writer, with a busy timeout so that concurrent writers
	// wait their turn, and BEGIN IMMEDIATE for transactions, as the SQL
	// packages' documentation advises.
	SQLite = Backend{"SQLite", sqldialect.SQLite, "sqlite", sqliteDSN("&_txlock=immediate")}
	// SQLiteDeferred is SQLite whose transactions begin deferred: one
	// takes the write lock at its first write, and until then other
	// connections write.
	SQLiteDeferred = Backend{"SQLite", sqldialect.SQLite, "sqlite", sqliteDSN("")}
	// MySQL is MariaDB or MySQL (testenv.MySQL).
	MySQL = Backend{"MySQL", sqldialect.MySQL, "mysql", testenv.MySQL}
	// Postgres is PostgreSQL (testenv.Postgres).
	Postgres = Backend{"Postgres", sqldialect.Postgres, "pgx", testenv.Postgres}
	// MySQLOptions is MySQL through a DSN with the options that change
	// what the server answers: rows affected count matched rows, and
	// arguments are interpolated into the statement text by the driver.
	MySQLOptions = Backend{"MySQLOptions", sqldialect.MySQL, "mysql", func(tb testing.TB) string {
		cfg, err := mysql.ParseDSN(testenv.MySQL(tb))
		if err != nil {
			tb.Fatal(err)
		}
		cfg.ClientFoundRows, cfg.InterpolateParams = true, true
		return cfg.FormatDSN()
	}}
)

// sqliteDSN returns the DSNs of files in WAL mode with a busy timeout and
// more, a query string's tail.
func sqliteDSN(more string) func(testing.TB) string {
	return func(tb testing.TB) string {
		return "file:" + filepath.Join(tb.TempDir(), "test.db") +
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" + more
	}
}

// Backends are the databases every SQL package is tested on.
var Backends = []Backend{SQLite, MySQL, Postgres}

// OpenNamed opens dsn with the driver of the backend of [Backends] or
// [MySQLOptions] called name, for a child process, which has no testing.TB
// and hands its backend over by name; the caller closes the *sql.DB.
func OpenNamed(name, dsn string) (*sql.DB, Backend, error) {
	for _, b := range append(Backends, MySQLOptions) {
		if b.Name == name {
			db, err := sql.Open(b.Driver, dsn)
			return db, b, err
		}
	}
	return nil, Backend{}, fmt.Errorf("testdb: no backend %q", name)
}

// Server returns the address (host:port) of b's database server, for a
// benchmark that charges the server's CPU to its work, or "" for SQLite,
// which runs in the test's own process.
func (b Backend) Server(tb testing.TB) string {
	tb.Helper()
	switch b.Dialect {
	case sqldialect.MySQL:
		cfg, err := mysql.ParseDSN(testenv.MySQL(tb))
		if err != nil {
			tb.Fatal(err)
		}
		return cfg.Addr
	case sqldialect.Postgres:
		u, err := url.Parse(testenv.Postgres(tb))
		if err != nil {
			tb.Fatal(err)
		}
		return u.Host
	}
	return ""
}

// Open returns a fresh database of b, closed when tb ends.
func (b Backend) Open(tb testing.TB) *sql.DB {
	tb.Helper()
	return b.OpenDSN(tb, b.DSN(tb))
}

// OpenDSN opens dsn, a database of b, with a pool of its own, closed when
// tb ends: as another process would.
func (b Backend) OpenDSN(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open(b.Driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// OpenWith returns a fresh database of b through a driver that departs
// from b's as h says, closed when tb ends.
func (b Backend) OpenWith(tb testing.TB, h *Hooks) *sql.DB {
	tb.Helper()
	dsn := b.DSN(tb)
	plain, err := sql.Open(b.Driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	drv := plain.Driver()
	plain.Close()
	var c driver.Connector = dsnConnector{drv, dsn}
	if dc, ok := drv.(driver.DriverContext); ok {
		if c, err = dc.OpenConnector(dsn); err != nil {
			tb.Fatal(err)
		}
	}
	db := sql.OpenDB(connector{c, h})
	tb.Cleanup(func() { db.Close() })
	return db
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }
