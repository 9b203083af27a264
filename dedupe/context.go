package dedupe

import (
	"context"
	"database/sql"
)

// claim is what a [Guard] holds while fn runs, reachable from fn's context
// (its lease): the ticket of its key (a zero Token when fn runs without
// one, unguarded) and, in the transactional mode, fn's transaction.
type claim struct {
	ticket Ticket
	tx     *sql.Tx
}

type claimKey struct{}

func claimFrom(ctx context.Context) *claim {
	c, _ := ctx.Value(claimKey{}).(*claim)
	return c
}

// TicketFromContext returns the ticket of the claim that a [Guard] holds
// while it runs fn with ctx (or a context derived from it). ok is false
// outside its Do, and when FailOpen runs fn without a claim.
func TicketFromContext(ctx context.Context) (t Ticket, ok bool) {
	if c := claimFrom(ctx); c != nil && c.ticket.Token != "" {
		return c.ticket, true
	}
	return Ticket{}, false
}

// TxFromContext returns the transaction in which a [Guard] in the
// transactional mode ([GuardConfig.Tx]) runs fn with ctx (or a context
// derived from it): the one whose first statement claimed fn's key, or,
// when FailOpen runs fn without a claim, a plain one. ok is false outside
// that mode.
func TxFromContext(ctx context.Context) (tx *sql.Tx, ok bool) {
	if c := claimFrom(ctx); c != nil && c.tx != nil {
		return c.tx, true
	}
	return nil, false
}
