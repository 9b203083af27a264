package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TxClaimer is implemented by stores that keep their records in a SQL
// database and can claim a key inside a transaction of it, such as
// [github.com/idemq/idemq/dedupe/sqldedupe.Store]. A handler whose effects
// live in that database then applies them exactly once, at one commit per
// message: the key's record is the transaction's first write and commits
// with the handler's writes, or rolls back with them. [TxGuard] runs
// handlers so.
type TxClaimer interface {
	// BeginTx begins a transaction on the database the store keeps its
	// records in. It fails with ErrInFlight when the database's one write
	// lock stayed busy past the store's lock timeout (SQLite), and with an
	// error of its own when the database failed.
	BeginTx(ctx context.Context) (*sql.Tx, error)
	// ClaimTx claims ref as tx's first statement. Unless a live record
	// answers the claim, it writes the key's record done, kept for
	// retention from the store's now: Acquired, and tx holds the key. A
	// live record answers as it would [Store.Claim]: Done, Conflict for a
	// fingerprint of the same kind that differs (see [ClaimRequest]), or
	// InFlight for a lease another owner took with Claim. A record whose
	// lease or retention has ended is taken over.
	//
	// The record takes effect only when tx commits; a rollback leaves the
	// key as it was, and so does a consumer that dies holding it (its
	// connection closes, and the database rolls tx back). Until tx ends the
	// record's row is locked: another claim of the key, by ClaimTx or by
	// Claim, waits for tx's outcome, and ClaimTx waits no longer than the
	// store's lock timeout.
	//
	// Errors: ErrInvalidKey for a bad ref or fingerprint; ErrInFlight when
	// the key stayed locked by another transaction past the lock timeout,
	// or the database rolled tx back to break a deadlock (Remaining is
	// unknown: ask again); any other error means that the store failed.
	// After any answer but Acquired, tx holds nothing and is to be rolled
	// back.
	ClaimTx(ctx context.Context, tx *sql.Tx, ref Ref, fingerprint string, retention time.Duration) (ClaimResult, error)
}

// TxGuard runs a handler exactly once per key for the effects it writes in
// its transaction, at one commit per message: for each message it begins a
// transaction on the store's database, claims the key in it
// ([TxClaimer.ClaimTx]), runs the handler with it and commits, which
// applies the handler's writes and records the key done together; a
// failure rolls back both. It is the [Guard] of the transactional mode,
// without leases: the claimed row's lock holds the key until the
// transaction ends, so nothing is extended, completed or released, and a
// consumer that dies holding a key leaves nothing behind. It is safe for
// concurrent use.
type TxGuard struct {
	store TxClaimer
	cfg   GuardConfig
	// keep holds the contexts of the fns running, for Interrupt; it
	// extends nothing.
	keep keeper
}

// NewTxGuard returns a TxGuard over store. Of cfg it uses Retention and
// FailOpen; Lease, which holds no key here, is only validated (a
// consumer waits in process for a busy key that long by default), and
// ExtendEvery and CleanupTimeout have nothing to bound.
func NewTxGuard(store TxClaimer, cfg GuardConfig) (*TxGuard, error) {
	if store == nil {
		return nil, errors.New("dedupe: nil store")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &TxGuard{store: store, cfg: cfg}, nil
}

// Config returns the TxGuard's settings, defaults filled in.
func (g *TxGuard) Config() GuardConfig { return g.cfg }

// Interrupt cancels, with cause, the context of every fn that g runs now,
// as [Guard.Interrupt] does. From then on no transaction begins: the items
// whose turn comes are Canceled, with cause. A fn that returns nil all the
// same has its transaction committed. Only the first call's cause counts.
func (g *TxGuard) Interrupt(cause error) { g.keep.interrupt(cause) }

// Do runs fn(ctx, i) for each of items whose key it claims, one item after
// the other, each in a transaction of its own, and returns what it did with
// each, in items' order: the outcomes of [Guard.Do], reached so —
//
//   - Completed: fn returned nil, and its transaction, with the key's
//     record, committed;
//   - Failed: fn, or the commit, failed (Err says which) and the
//     transaction rolled back, so a redelivery runs at once. A commit whose
//     answer was lost may have committed; the redelivery then finds the
//     key done;
//   - Suppressed, Reused: the key's live record answered Done or Conflict;
//   - Busy: another owner holds the key: a lease taken with [Store.Claim]
//     (Wait is what is left of it), or another transaction that did not end
//     within the store's lock timeout (Wait 0: ask again);
//   - StoreDown: the transaction or the claim failed; with FailOpen, a
//     failed claim runs fn in a transaction of its own without a record
//     (Unguarded, or Failed), while a failed begin does not (fn's
//     transaction cannot run either);
//   - InvalidKey, Canceled: as Guard.Do.
//
// An item whose Ref and Fingerprint repeat an earlier item's is answered
// as Guard.Do answers it, without a transaction.
//
// fn's context carries its transaction ([TxFromContext]) and its claim's
// ticket ([TicketFromContext]); as under Guard.Do, it ends with ctx, when
// [TxGuard.Interrupt] is called and once fn has returned, and is made
// cancellable only when fn asks for its Done. fn must neither commit nor
// roll back the transaction. A panic in fn rolls the transaction back and is not
// recovered: recover in fn.
func (g *TxGuard) Do(ctx context.Context, items []Item, fn func(ctx context.Context, i int) error) []Result {
	res := make([]Result, len(items))
	pending := make([]int, 0, len(items)) // the items claimed, or to be
	var seen map[Item]int
	if len(items) > scanLimit {
		seen = make(map[Item]int, len(items))
	}
	for i, it := range items {
		if err := (ClaimRequest{Ref: it.Ref, Lease: g.cfg.Retention, Fingerprint: it.Fingerprint}).Validate(); err != nil {
			res[i] = Result{Outcome: InvalidKey, Err: fmt.Errorf("dedupe: claim %q: %w", it.Ref, err)}
			continue
		}
		// The earlier item's turn has come and gone: its Result is final.
		if f := firstOf(items, pending, seen, i); f >= 0 {
			res[i] = repeated(res[f], it.Ref, f)
			continue
		}
		pending = append(pending, i)
		if ctx.Err() != nil {
			res[i] = Result{Outcome: Canceled, Err: context.Cause(ctx)}
			continue
		}
		res[i] = g.run(ctx, it, i, fn)
	}
	return res
}

// run claims it in a transaction of its own and, once acquired, runs fn
// for item i in it and commits.
func (g *TxGuard) run(ctx context.Context, it Item, i int, fn func(context.Context, int) error) Result {
	// fn's context, registered before the transaction begins, so that
	// after an Interrupt no transaction begins either.
	ls := make([]lease, 1)
	l := &ls[0]
	l.parent, l.i = ctx, i
	g.keep.add(ls, time.Time{})
	// Deferred so that the context ends even if fn panics.
	defer g.keep.remove(ls)
	if l.Err() != nil {
		return Result{Outcome: Canceled, Err: context.Cause(l)}
	}
	tx, err := g.store.BeginTx(ctx)
	if err != nil {
		return notRun(ctx, "begin a transaction for "+it.Ref.String(), err)
	}
	// Undoes the claim and fn's writes on every path but a commit, a panic
	// in fn included; a no-op after Commit.
	defer tx.Rollback()
	a, err := g.store.ClaimTx(ctx, tx, it.Ref, it.Fingerprint, g.cfg.Retention)
	switch {
	case err == nil:
	case g.cfg.FailOpen && ctx.Err() == nil && !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrInFlight):
		tx.Rollback()
		return g.unguarded(ctx, it, l, fn, err)
	default:
		return notRun(ctx, "claim "+it.Ref.String(), err)
	}
	switch a.Status {
	case Acquired:
	case Done:
		return Result{Outcome: Suppressed}
	case InFlight:
		return Result{Outcome: Busy, Wait: a.Remaining}
	case Conflict:
		return Result{Outcome: Reused}
	default:
		return Result{Outcome: StoreDown, Err: fmt.Errorf("dedupe: claim %s answered %v", it.Ref, a.Status)}
	}
	l.c = claim{ticket: Ticket{Ref: it.Ref, Token: a.Token}, tx: tx}
	return g.commit(ctx, it, l, fn, tx, Result{Outcome: Completed})
}

// unguarded runs fn for l's item without a claim, in a transaction of its
// own, because the claim failed with cause.
func (g *TxGuard) unguarded(ctx context.Context, it Item, l *lease, fn func(context.Context, int) error, cause error) Result {
	tx, err := g.store.BeginTx(ctx)
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
func (g *TxGuard) commit(ctx context.Context, it Item, l *lease, fn func(context.Context, int) error, tx *sql.Tx, ok Result) Result {
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
	case errors.Is(err, ErrInvalidKey):
		return Result{Outcome: InvalidKey, Err: err}
	case errors.Is(err, ErrInFlight):
		return Result{Outcome: Busy, Err: fmt.Errorf("dedupe: %s: %w", what, err)}
	case ctx.Err() != nil:
		return Result{Outcome: Canceled, Err: context.Cause(ctx)}
	}
	return Result{Outcome: StoreDown, Err: fmt.Errorf("dedupe: %s: %w", what, err)}
}
