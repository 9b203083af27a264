package sqldedupe_test

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql" // "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }

// backend is a real database of one dialect.
type backend struct {
	name    string
	dialect sqldedupe.Dialect
	driver  string
	// dsn returns the DSN of a fresh, empty database.
	dsn func(testing.TB) string
}

var backends = []backend{
	{"SQLite", sqldedupe.SQLite, "sqlite", sqliteDSN},
	{"MySQL", sqldedupe.MySQL, "mysql", testenv.MySQL},
	{"Postgres", sqldedupe.Postgres, "pgx", testenv.Postgres},
}

func backendFor(d sqldedupe.Dialect) backend {
	for _, b := range backends {
		if b.dialect == d {
			return b
		}
	}
	panic(fmt.Sprintf("no backend for %v", d))
}

// sqliteDSN is a file database in WAL mode, in which readers do not block
// the writer, with a busy timeout so that concurrent writers wait their turn.
func sqliteDSN(tb testing.TB) string {
	return "file:" + filepath.Join(tb.TempDir(), "dedupe.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
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

// openCounting is open with a count of the statements the database ran:
// every Exec and Query of a prepared statement, which is how the Store and
// database/sql run everything through the wrapper below.
func (b backend) openCounting(tb testing.TB) (*sql.DB, *atomic.Int64) {
	tb.Helper()
	return b.openWrapped(tb, wrapping{})
}

// wrapping says how openWrapped's driver departs from the real one.
type wrapping struct {
	// opaque makes statements' errors lose their chain, as drivers that
	// report a cancelled query in their own words (lib/pq's "canceling
	// statement due to user request") return them.
	opaque bool
	// noInsertID answers 0 for every insert id, as a MySQL proxy that does
	// not pass the server's on does.
	noInsertID bool
	// hook, when set, runs before each statement outside a transaction
	// and returns what runs once the statement has run, or nil. An error
	// from that replaces the statement's answer, which is lost.
	hook func(query string) (after func() error)
}

// openWrapped is openCounting through a driver that departs from the real
// one as w says.
func (b backend) openWrapped(tb testing.TB, w wrapping) (*sql.DB, *atomic.Int64) {
	tb.Helper()
	dsn := b.dsn(tb)
	plain, err := sql.Open(b.driver, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	drv := plain.Driver()
	plain.Close()
	var inner driver.Connector = dsnConnector{drv, dsn}
	if dc, ok := drv.(driver.DriverContext); ok {
		if inner, err = dc.OpenConnector(dsn); err != nil {
			tb.Fatal(err)
		}
	}
	n := new(atomic.Int64)
	db := sql.OpenDB(countingConnector{inner, n, w})
	tb.Cleanup(func() { db.Close() })
	return db, n
}

// newStore returns a migrated Store over db, closed when tb ends.
func newStore(tb testing.TB, db *sql.DB, d sqldedupe.Dialect, cfg sqldedupe.Config) *sqldedupe.Store {
	tb.Helper()
	s, err := sqldedupe.New(db, d, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// countingConnector wraps a driver's connections to count statements. It
// hides the connections' direct Exec and Query, so database/sql prepares
// everything it runs.
type countingConnector struct {
	driver.Connector
	n *atomic.Int64
	w wrapping
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c.n, c.w, new(bool)}, nil
}

type countingConn struct {
	driver.Conn
	n    *atomic.Int64
	w    wrapping
	inTx *bool // database/sql uses a connection from one goroutine at a time
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return countingStmt{st, c, c.n, query}, nil
}

func (c countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	*c.inTx = true
	return countingTx{tx, c.inTx}, nil
}

type countingTx struct {
	driver.Tx
	inTx *bool
}

func (t countingTx) Commit() error {
	*t.inTx = false
	return t.Tx.Commit()
}

func (t countingTx) Rollback() error {
	*t.inTx = false
	return t.Tx.Rollback()
}

// hook runs the wrapping's hook for query, unless in a transaction.
func (c countingConn) hook(query string) (after func() error) {
	if c.w.hook == nil || *c.inTx {
		return nil
	}
	return c.w.hook(query)
}

// CheckNamedValue keeps the driver's own argument types, such as pgx's
// arrays.
func (c countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type countingStmt struct {
	driver.Stmt
	conn  countingConn
	n     *atomic.Int64
	query string
}

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Add(1)
	after := s.conn.hook(s.query)
	res, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	if after != nil {
		if herr := after(); herr != nil {
			return nil, herr
		}
	}
	if err == nil && s.conn.w.noInsertID {
		res = noInsertID{res}
	}
	return res, s.conn.flatten(err)
}

type noInsertID struct{ driver.Result }

func (noInsertID) LastInsertId() (int64, error) { return 0, nil }

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Add(1)
	after := s.conn.hook(s.query)
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if after != nil {
		if err == nil {
			// Read the rows out, so that the statement has run to its
			// end before its answer is judged.
			saved := &savedRows{cols: rows.Columns()}
			for {
				row := make([]driver.Value, len(saved.cols))
				if saved.err = rows.Next(row); saved.err != nil {
					break
				}
				for i, v := range row {
					if b, ok := v.([]byte); ok { // the driver's buffer
						row[i] = bytes.Clone(b)
					}
				}
				saved.rows = append(saved.rows, row)
			}
			rows.Close()
			rows = saved
		}
		if herr := after(); herr != nil {
			return nil, herr
		}
	}
	return rows, s.conn.flatten(err)
}

// savedRows answers rows read out before, then the error that ended them.
type savedRows struct {
	cols []string
	rows [][]driver.Value
	err  error
}

func (r *savedRows) Columns() []string { return r.cols }
func (r *savedRows) Close() error      { return nil }

func (r *savedRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return r.err
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

func (c countingConn) flatten(err error) error {
	if err == nil || !c.w.opaque {
		return err
	}
	return errors.New(err.Error())
}

// CheckNamedValue asks the statement, then its connection: database/sql
// asks the connection only when the statement has no checker.
func (s countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}
