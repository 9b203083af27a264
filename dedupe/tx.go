package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/msgkey"
)

// TxClaimer is implemented by stores that keep their records in a SQL
// database and can claim a key inside a transaction of it, such as
// [github.com/idemq/idemq/dedupe/sqldedupe.Store]. A handler whose effects
// live in that database then applies them exactly once, at one commit per
// message: the key's record is the transaction's first write and commits
// with the handler's writes, or rolls back with them. A [Guard] in the
// transactional mode ([GuardConfig.Tx]) runs handlers so.
type TxClaimer interface {
	// BeginTx begins a transaction on the database the store keeps its
	// records in. It fails with ErrBusy when the database's one write
	// lock stayed busy past the store's lock timeout (SQLite), and with an
	// error of its own when the database failed.
	BeginTx(ctx context.Context) (*sql.Tx, error)
	// ClaimTx claims the item's key as tx's first statement. Unless a
	// live record answers the claim, it writes the key's record done, kept
	// for retention from the store's now: Acquired, and tx holds the key.
	// A live record answers as it would [Store.Claim]: Suppressed, Reused
	// for a fingerprint of the same kind that differs (see [Item]), or
	// Busy for a lease another owner took with Claim. A record whose lease
	// or retention has ended is taken over.
	//
	// The record takes effect only when tx commits; a rollback leaves the
	// key as it was, and so does a consumer that dies holding it (its
	// connection closes, and the database rolls tx back). Until tx ends the
	// record's row is locked: another claim of the key, by ClaimTx or by
	// Claim, waits for tx's outcome, and ClaimTx waits no longer than the
	// store's lock timeout.
	//
	// Errors: msgkey.ErrInvalid for a bad ref or fingerprint; ErrBusy when
	// the key stayed locked by another transaction past the lock timeout,
	// or the database rolled tx back to break a deadlock (how long to wait
	// is unknown: ask again); any other error means that the store failed.
	// After any answer but Acquired, tx holds nothing and is to be rolled
	// back.
	ClaimTx(ctx context.Context, tx *sql.Tx, it Item, retention time.Duration) (ClaimResult, error)
}

// runTx is the transactional mode's turn of item i, it: it claims it in a
// transaction of its own and, once acquired, runs fn for it in that
// transaction and commits. Without leases: the claimed row's lock holds the
// key until the transaction ends, so nothing is extended, completed or
// released, and a consumer that dies holding a key leaves nothing behind.
func (g *Guard) runTx(ctx context.Context, it Item, i int, fn func(context.Context, int) error) Result {
	// fn's context, registered before the transaction begins, so that
	// after an Interrupt no transaction begins either.
	ls := make([]lease, 1)
	l := &ls[0]
	l.parent, l.i = ctx, i
	g.keep.add(ls, time.Time{})
	// Deferred so that the context ends even if fn panics.
	defer g.keep.remove(ls)
	if ctx.Err() != nil || l.Err() != nil {
		return Result{Outcome: Canceled, Err: context.Cause(l)}
	}
	tx, err := g.tx.BeginTx(ctx)
	if err != nil {
		return notRun(ctx, "begin a transaction for "+it.Ref.String(), err)
	}
	// Undoes the claim and fn's writes on every path but a commit, a panic
	// in fn included; a no-op after Commit.
	defer tx.Rollback()
	a, err := g.tx.ClaimTx(ctx, tx, it, g.cfg.Retention)
	switch {
	case err == nil:
	case g.cfg.FailOpen && ctx.Err() == nil && !errors.Is(err, msgkey.ErrInvalid) && !errors.Is(err, ErrBusy):
		tx.Rollback()
		return g.unguardedTx(ctx, it, l, fn, err)
	default:
		return notRun(ctx, "claim "+it.Ref.String(), err)
	}
	if r, ok := answered(a, it.Ref); ok {
		return r
	}
	l.c = claim{ticket: Ticket{Ref: it.Ref, Token: a.Token, Trace: it.Trace}, tx: tx}
	return g.commit(ctx, it, l, fn, tx, Result{Outcome: Completed})
}

// unguardedTx runs fn for l's item without a claim, in a transaction of
// its own, because the claim failed with cause.
func (g *Guard) unguardedTx(ctx context.Context, it Item, l *lease, fn func(context.Context, int) error, cause error) Result {
	tx, err := g.tx.BeginTx(ctx)
	if err != nil {
		return notRun(ctx, "begin a transaction for "+it.Ref.String(), err)
	}
	defer tx.Rollback()
	// No ticket: fn sees no claim, not even an outer Guard's.
	l.c = claim{tx: tx}
	return g.commit(ctx, it, l, fn, tx, Result{Outcome: Unguarded, Err: fmt.Errorf("dedupe: claim %s: %w", it.Ref, cause)})
}

// commit runs fn for l's item with l as its context, unless ctx ended or
// g was interrupted meanwhile, and commits tx: ok once it committed. The
// caller rolls tx back otherwise.
func (g *Guard) commit(ctx context.Context, it Item, l *lease, fn func(context.Context, int) error, tx *sql.Tx, ok Result) Result {
	if ctx.Err() != nil || l.Err() != nil {
		return Result{Outcome: Canceled, Err: context.Cause(l)}
	}
	if err := fn(l, l.i); err != nil {
		return Result{Outcome: Failed, Err: err}
	}
	if err := tx.Commit(); err != nil {
		return Result{Outcome: Failed, Err: fmt.Errorf("dedupe: commit %s: %w", it.Ref, err)}
	}
	return ok
}

// notRun is the Result of an item whose handler did not run because what
// failed with err: a bad key, a key held by another transaction, the
// caller giving up, or the store failing.
func notRun(ctx context.Context, what string, err error) Result {
	switch {
	case errors.Is(err, msgkey.ErrInvalid):
		return Result{Outcome: InvalidKey, Err: err}
	case errors.Is(err, ErrBusy):
		return Result{Outcome: Busy, Err: fmt.Errorf("dedupe: %s: %w", what, err)}
	case ctx.Err() != nil:
		return Result{Outcome: Canceled, Err: context.Cause(ctx)}
	}
	return Result{Outcome: StoreDown, Err: fmt.Errorf("dedupe: %s: %w", what, err)}
}
