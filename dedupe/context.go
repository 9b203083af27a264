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

// ClaimFromContext returns what a [Guard] holds while it runs fn with ctx
// (or a context derived from it): the ticket of fn's key, and fn's
// transaction in the transactional mode ([GuardConfig.Tx]), the one whose
// first statement claimed the key. ok is false outside Do. When FailOpen
// runs fn without a claim the ticket is zero, and in the
// transactional mode tx is then a plain transaction of its own; tx is nil
// outside that mode.
func ClaimFromContext(ctx context.Context) (t Ticket, tx *sql.Tx, ok bool) {
	c := claimFrom(ctx)
	if c == nil {
		return Ticket{}, nil, false
	}
	return c.ticket, c.tx, true
}
