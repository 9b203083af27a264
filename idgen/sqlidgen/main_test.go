package sqlidgen_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"   // "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite"

	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) {
	racechild.Main(fleettest.Roles(newChildLeaser, newChildSegments))
	os.Exit(testenv.Run(m))
}

// backend is a real database of one dialect.
type backend struct {
	name    string
	dialect sqlidgen.Dialect
	driver  string
	// dsn returns the DSN of a fresh, empty database.
	dsn func(testing.TB) string
}

var backends = []backend{
	{"SQLite", sqlidgen.SQLite, "sqlite", sqliteDSN},
	{"MySQL", sqlidgen.MySQL, "mysql", testenv.MySQL},
	{"Postgres", sqlidgen.Postgres, "pgx", testenv.Postgres},
}

// mysqlOptions is MySQL through a DSN with the options that change what the
// server answers: rows affected count matched rows, and arguments are
// interpolated into the statement text by the driver.
var mysqlOptions = backend{"MySQLOptions", sqlidgen.MySQL, "mysql", func(tb testing.TB) string {
	cfg, err := mysql.ParseDSN(testenv.MySQL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ClientFoundRows, cfg.InterpolateParams = true, true
	return cfg.FormatDSN()
}}

// sqliteDSN is a file database in WAL mode, in which readers do not block
// the writer, with a busy timeout so that concurrent writers wait their
// turn, and BEGIN IMMEDIATE for transactions, as the package documentation
// advises.
func sqliteDSN(tb testing.TB) string {
	return "file:" + filepath.Join(tb.TempDir(), "ids.db") +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
}

// open returns a fresh database, closed when tb ends.
func (b backend) open(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open(b.driver, b.dsn(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// connector returns a connector of a fresh database through b's driver,
// for tests that wrap what the driver sends.
func (b backend) connector(tb testing.TB) driver.Connector {
	tb.Helper()
	dsn := b.dsn(tb)
	plain, err := sql.Open(b.driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	drv := plain.Driver()
	plain.Close()
	if dc, ok := drv.(driver.DriverContext); ok {
		c, err := dc.OpenConnector(dsn)
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	return dsnConnector{drv, dsn}
}

// openFaulty is open through a driver that runs every statement and then
// hands its answer to f, which may replace it by an error: the answer was
// lost on the way back.
func (b backend) openFaulty(tb testing.TB, f func(query string) error) *sql.DB {
	tb.Helper()
	db := sql.OpenDB(faultyConnector{b.connector(tb), f})
	tb.Cleanup(func() { db.Close() })
	return db
}

// newLeaser returns a Leaser over db, with its table migrated.
func newLeaser(tb testing.TB, db *sql.DB, d sqlidgen.Dialect, cfg sqlidgen.Config) *sqlidgen.Leaser {
	tb.Helper()
	l, err := sqlidgen.New(db, d, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return l
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// faultyConnector wraps a driver's connections to pass every answer through
// f. It hides the connections' direct Exec and Query, so database/sql
// prepares everything it runs.
type faultyConnector struct {
	driver.Connector
	f func(query string) error
}

func (c faultyConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return faultyConn{conn, c.f}, nil
}

type faultyConn struct {
	driver.Conn
	f func(query string) error
}

func (c faultyConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return faultyStmt{st, c, query}, nil
}

// CheckNamedValue keeps the driver's own argument types.
func (c faultyConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type faultyStmt struct {
	driver.Stmt
	conn  faultyConn
	query string
}

func (s faultyStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	res, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	if err != nil {
		return nil, err
	}
	if err := s.conn.f(s.query); err != nil {
		return nil, err
	}
	return res, nil
}

func (s faultyStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	if err := s.conn.f(s.query); err != nil {
		// Reading to the end lets a statement that writes finish, as
		// it would on the server before the answer was lost.
		dest := make([]driver.Value, len(rows.Columns()))
		for rows.Next(dest) == nil {
		}
		rows.Close()
		return nil, err
	}
	return rows, nil
}

// CheckNamedValue asks the statement, then its connection.
func (s faultyStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}
