package sqldedupe

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// runner issues a Store's statements on its database, or inside a caller's
// transaction when tx is set, through the Store's prepared statements.
type runner struct {
	s  *Store
	tx *sql.Tx
}

// stmt returns query's prepared statement, bound to r.tx when there is one,
// or nil when there is none to use. Preparing takes a connection of the pool
// besides the transaction's, so inside a transaction on a bounded pool, which
// the transaction may hold the last connection of, it only takes a statement
// prepared before.
func (r runner) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if r.tx == nil || r.s.db.Stats().MaxOpenConnections == 0 {
		st, err := r.s.stmts.get(ctx, r.s.db, query)
		if st == nil || err != nil || r.tx == nil {
			return st, err
		}
		return r.tx.StmtContext(ctx, st), nil
	}
	if st := r.s.stmts.lookup(query); st != nil {
		return r.tx.StmtContext(ctx, st), nil
	}
	return nil, nil
}

func (r runner) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := r.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return st.ExecContext(ctx, args...)
	case r.tx != nil:
		return r.tx.ExecContext(ctx, query, args...)
	}
	return r.s.db.ExecContext(ctx, query, args...)
}

func (r runner) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := r.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case st != nil:
		return st.QueryContext(ctx, args...)
	case r.tx != nil:
		return r.tx.QueryContext(ctx, query, args...)
	}
	return r.s.db.QueryContext(ctx, query, args...)
}

// inTx runs fn inside r's transaction, or inside a new one it commits.
func (r runner) inTx(ctx context.Context, fn func(runner) error) error {
	if r.tx != nil {
		return fn(r)
	}
	tx, err := r.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(runner{s: r.s, tx: tx}); err != nil {
		// database/sql has rolled back a transaction whose context ended.
		if rerr := tx.Rollback(); !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, rerr)
		}
		return err
	}
	return tx.Commit()
}

// maxStmts bounds the prepared statements a Store keeps, each prepared once
// per connection (MySQL allows 16382 per server by default). On MySQL and
// SQLite a batch statement's text depends on its row count, so a Store keeps
// a few per batch size it is given; beyond the bound, the driver prepares
// statements per call.
const maxStmts = 64

// stmtCache keeps a Store's prepared statements. Preparing once matters most
// for go-sql-driver/mysql, which otherwise prepares, executes and closes a
// server-side statement on every call: two round trips instead of one.
//
// It never closes a statement while a caller may hold rows locked: closing
// waits for the connection the statement was prepared on, which may be
// running a statement that waits for those rows. So one caller prepares a
// query while the others wait for it, rather than racing and closing the
// losers' copies.
type stmtCache struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*cachedStmt
}

// cachedStmt is a query's statement, being prepared until ready is closed.
type cachedStmt struct {
	ready chan struct{}
	st    *sql.Stmt
}

// lookup returns query's statement if it has been prepared.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	e := c.m[query]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
		return e.st
	default:
		return nil
	}
}

// get returns query's statement, preparing it on first use, or nil when the
// cache is full or closed, or another caller failed to prepare it.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	e, ok := c.m[query]
	if ok || c.closed || len(c.m) >= maxStmts {
		c.mu.Unlock()
		if !ok {
			return nil, nil
		}
		select {
		case <-e.ready:
			return e.st, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e = &cachedStmt{ready: make(chan struct{})}
	c.m[query] = e
	c.mu.Unlock()

	// Prepared outside the lock: it is a round trip.
	st, err := db.PrepareContext(ctx, query)
	c.mu.Lock()
	closed := c.closed
	if err == nil && !closed {
		e.st = st
	} else {
		delete(c.m, query)
	}
	close(e.ready)
	c.mu.Unlock()
	if err == nil && closed {
		// The Store closed meanwhile: this call runs unprepared.
		_ = st.Close()
	}
	return e.st, err
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	c.closed = true
	var sts []*sql.Stmt
	for q, e := range c.m {
		select {
		case <-e.ready:
			sts = append(sts, e.st)
		default: // its preparer closes it
		}
		delete(c.m, q)
	}
	c.mu.Unlock()
	var errs []error
	for _, st := range sts {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}
