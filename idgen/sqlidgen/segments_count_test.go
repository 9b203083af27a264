package sqlidgen_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

// openCounting is open through a driver that counts what it sends the
// server: prepares, executions of prepared statements, and direct
// statements the driver runs itself (not those it hands back to
// database/sql to prepare). With every driver here each is one round trip.
func (b backend) openCounting(tb testing.TB, sent *atomic.Int64) *sql.DB {
	tb.Helper()
	db := sql.OpenDB(countingConnector{b.connector(tb), sent})
	tb.Cleanup(func() { db.Close() })
	return db
}

type countingConnector struct {
	driver.Connector
	sent *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c.sent}, nil
}

type countingConn struct {
	driver.Conn
	sent *atomic.Int64
}

func (c countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.sent.Add(1)
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return countingStmt{st, c}, nil
}

func (c countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ex, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := ex.ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.sent.Add(1)
	}
	return res, err
}

func (c countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.sent.Add(1)
	}
	return rows, err
}

// CheckNamedValue keeps the driver's own argument types.
func (c countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

type countingStmt struct {
	driver.Stmt
	conn countingConn
}

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.conn.sent.Add(1)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.conn.sent.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (s countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

// A segment costs one statement, one round trip, with a given step and with
// the stored one, once the Segments has prepared its UPDATE (and, on MySQL,
// read the tag's step); the slow paths cost a few.
func TestSegmentRoundTrips(t *testing.T) {
	for _, b := range append(backends, mysqlOptions) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			var sent atomic.Int64
			db := b.openCounting(t, &sent)
			// One connection: the statement is prepared on it once.
			db.SetMaxOpenConns(1)
			s := newSegments(t, db, b.dialect, sqlidgen.SegmentsConfig{})
			ctx := t.Context()
			if err := s.CreateTag(ctx, segment.Tag{Tag: "rt", Step: 10, Max: 1000}); err != nil {
				t.Fatal(err)
			}
			count := func(what string, want int64, call func() error) {
				t.Helper()
				before := sent.Load()
				if err := call(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got := sent.Load() - before; got != want {
					t.Fatalf("%s sent %d statements, want %d", what, got, want)
				}
			}
			next := func(step, start, end int64) func() error {
				return func() error {
					seg, err := s.NextSegment(ctx, "rt", step)
					if err == nil && (seg.Start != start || seg.End != end || seg.Step != 10 || seg.Max != 1000) {
						t.Fatalf("NextSegment(%d) = %+v, want [%d, %d) of step 10 and max 1000", step, seg, start, end)
					}
					return err
				}
			}
			// A read is one statement, but for MySQL without
			// interpolateParams, whose driver prepares a statement with
			// arguments in a round trip of its own.
			read := int64(1)
			if b.name == "MySQL" {
				read = 2
			}
			// The first: prepare and run the UPDATE; on MySQL, which
			// learns the stored step from the row, the read first.
			first := int64(2)
			if b.dialect == sqlidgen.MySQL {
				first += read
			}
			count("first NextSegment(0)", first, next(0, 0, 10))
			count("NextSegment(0)", 1, next(0, 10, 20))
			count("NextSegment(7)", 1, next(7, 20, 27))
			count("NextSegment(500)", 1, next(500, 27, 527))
			// Fewer IDs left than the step: the UPDATE matches nothing,
			// the read finds 473 left, the UPDATE takes them.
			count("short NextSegment(500)", 2+read, next(500, 527, 1000))
			count("NextSegment at the maximum", 1+read, func() error {
				if _, err := s.NextSegment(ctx, "rt", 0); !errors.Is(err, segment.ErrMaxReached) {
					t.Fatalf("NextSegment at the maximum = %v", err)
				}
				return nil
			})
		})
	}
}
