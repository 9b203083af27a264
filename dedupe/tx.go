package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"
)

// TxCompleter is implemented by stores that keep their records in a SQL
// database and can record a key done inside a caller's transaction, such as
// [github.com/idemq/idemq/dedupe/sqldedupe.Store]. A handler whose effects
// live in that database then applies them exactly once: its writes and the
// record commit together or not at all.
//
// CompleteTx is [Store.Complete] run inside tx, with the same errors. Its
// write takes effect only if tx commits; until tx ends it may hold a lock on
// the record, so that a competing Claim or Extend waits for the outcome.
// ErrLeaseLost means that another owner may have the key: tx must roll back.
// tx must have begun on the database the store keeps its records in.
type TxCompleter interface {
	CompleteTx(ctx context.Context, tx *sql.Tx, t Ticket, retention time.Duration) error
}

// claim is what a Guard holds while fn runs, reachable from fn's context.
type claim struct {
	ticket    Ticket
	retention time.Duration
	// completed is set once fn has recorded the key itself, which spares
	// the Guard a second round trip; atomic because fn may hand its context
	// to other goroutines.
	completed atomic.Bool
}

type claimKey struct{}

func claimFrom(ctx context.Context) *claim {
	c, _ := ctx.Value(claimKey{}).(*claim)
	return c
}

// TicketFromContext returns the ticket of the claim that a [Guard] holds
// while it runs fn with ctx (or a context derived from it). ok is false
// outside [Guard.Do], and when FailOpen runs fn without
// a claim.
func TicketFromContext(ctx context.Context) (t Ticket, ok bool) {
	if c := claimFrom(ctx); c != nil {
		return c.ticket, true
	}
	return Ticket{}, false
}

// errNoClaim is CompleteTx's answer outside a Guard: there is nothing to
// record, and committing the caller's writes regardless would lose the
// protection they count on.
var errNoClaim = errors.New("dedupe: complete in transaction: no claim in context; call from the fn of Guard.Do")

// CompleteTx records the key of the claim that the [Guard] running fn with
// ctx holds as done inside tx, for the Guard's retention, through s (which
// must be the Guard's store). fn's writes in tx and the record then commit
// together or not at all. Its errors are those of [TxCompleter]; outside
// [Guard.Do] it fails without writing.
//
// Once CompleteTx succeeded, a nil return from fn tells the Guard that tx
// committed: it acknowledges without completing the key again. So fn must
// return nil only after tx committed, and an error if the commit failed.
func CompleteTx(ctx context.Context, tx *sql.Tx, s TxCompleter) error {
	c := claimFrom(ctx)
	if c == nil {
		return errNoClaim
	}
	if err := s.CompleteTx(ctx, tx, c.ticket, c.retention); err != nil {
		return err
	}
	c.completed.Store(true)
	return nil
}
