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
type stmtCache struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*sql.Stmt
}

// lookup returns query's statement if it has been prepared.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

// get returns query's statement, preparing it on first use, or nil when the
// cache is full or closed.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.m[query]
	full := c.closed || len(c.m) >= maxStmts
	c.mu.Unlock()
	if ok || full {
		return st, nil
	}
	// Prepared outside the lock: it is a round trip. Two callers may race to
	// prepare one query; the loser closes its copy.
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[query]; ok || c.closed || len(c.m) >= maxStmts {
		st.Close()
		return old, nil
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}
