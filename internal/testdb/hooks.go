package testdb

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
)

// Hooks say how the driver of a database opened by [Backend.OpenWith]
// departs from the real one, and count what it sends the server. Set the
// hooks before the database is used; the counts may be read at any time.
type Hooks struct {
	// Prepares counts the statements the driver prepared on the server,
	// Runs the statements it ran, prepared or not. With every driver here
	// each is one round trip.
	Prepares, Runs atomic.Int64
	// Statement, when set, runs before each statement outside a
	// transaction and returns what runs once the statement has run, or
	// nil; an error from that replaces the statement's answer, which is
	// lost. With Statement set, database/sql prepares every statement
	// (the driver's direct Exec and Query are hidden), so that each passes
	// through it once.
	Statement func(query string) (after func() error)
	// Commit, when set, runs in place of each commit, given the
	// transaction's own commit and rollback: it may refuse a commit
	// (roll back and fail) or lose its answer (commit and fail).
	Commit func(commit, rollback func() error) error
	// Opaque makes statements' errors lose their chain, as drivers that
	// report a cancelled query in their own words (lib/pq's "canceling
	// statement due to user request") return them.
	Opaque bool
	// NoInsertID answers 0 for every insert id, as a MySQL proxy that does
	// not pass the server's on does.
	NoInsertID bool
}

// RoundTrips is the number of statements prepared and run so far.
func (h *Hooks) RoundTrips() int64 { return h.Prepares.Load() + h.Runs.Load() }

// connector wraps a driver's connections in conn, or directConn.
type connector struct {
	driver.Connector
	h *Hooks
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cn := &conn{Conn: dc, h: c.h}
	if c.h.Statement != nil {
		return cn, nil
	}
	return directConn{cn}, nil
}

// conn passes a driver connection's statements through its hooks.
// database/sql uses a connection from one goroutine at a time.
type conn struct {
	driver.Conn
	h    *Hooks
	inTx bool
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.h.Prepares.Add(1)
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return stmt{st, c, query}, nil
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return tx{t, c}, nil
}

// CheckNamedValue keeps the driver's own argument types, such as pgx's
// arrays.
func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// statement runs the Statement hook for query, unless in a transaction.
func (c *conn) statement(query string) (after func() error) {
	if c.h.Statement == nil || c.inTx {
		return nil
	}
	return c.h.Statement(query)
}

// result applies the hooks to a statement's answer.
func (c *conn) result(res driver.Result, err error) (driver.Result, error) {
	if err == nil && c.h.NoInsertID {
		res = noInsertID{res}
	}
	return res, c.flatten(err)
}

func (c *conn) flatten(err error) error {
	if err == nil || !c.h.Opaque {
		return err
	}
	return errors.New(err.Error())
}

// directConn is conn with the driver's direct Exec and Query, which run a
// statement without preparing it where the driver can.
type directConn struct{ *conn }

func (c directConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ex, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := ex.ExecContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err
	}
	c.h.Runs.Add(1)
	return c.result(res, err)
}

func (c directConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err
	}
	c.h.Runs.Add(1)
	return rows, c.flatten(err)
}

type tx struct {
	driver.Tx
	c *conn
}

func (t tx) Commit() error {
	t.c.inTx = false
	if t.c.h.Commit != nil {
		return t.c.h.Commit(t.Tx.Commit, t.Tx.Rollback)
	}
	return t.Tx.Commit()
}

func (t tx) Rollback() error {
	t.c.inTx = false
	return t.Tx.Rollback()
}

type stmt struct {
	driver.Stmt
	c     *conn
	query string
}

func (s stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.h.Runs.Add(1)
	after := s.c.statement(s.query)
	res, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	if after != nil {
		if herr := after(); herr != nil {
			return nil, herr
		}
	}
	return s.c.result(res, err)
}

func (s stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.h.Runs.Add(1)
	after := s.c.statement(s.query)
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if after != nil {
		if err == nil {
			// Read the rows out, so that the statement has run to its
			// end before its answer is judged.
			rows = readOut(rows)
		}
		if herr := after(); herr != nil {
			return nil, herr
		}
	}
	return rows, s.c.flatten(err)
}

// CheckNamedValue asks the statement, then its connection: database/sql
// asks the connection only when the statement has no checker.
func (s stmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.c.CheckNamedValue(nv)
}

type noInsertID struct{ driver.Result }

func (noInsertID) LastInsertId() (int64, error) { return 0, nil }

// readOut reads rows to their end and closes them, and returns rows that
// answer what they read, then the error that ended them.
func readOut(rows driver.Rows) driver.Rows {
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
	return saved
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
