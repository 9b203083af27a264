package sqldedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
)

var _ dedupe.TxCompleter = (*Store)(nil)

// CompleteTx implements [dedupe.TxCompleter]: it marks t done for retention
// inside tx, so the record commits or rolls back with the caller's own
// writes in tx and a handler whose effects live in the same database applies
// them exactly once. It is [Store.Complete] otherwise, with the same errors;
// ErrLeaseLost means tx must roll back. It is the one way to record a key
// in a transaction: the consumer's transactional handler calls it through
// [dedupe.CompleteTx].
//
// tx must have begun on the *sql.DB given to [New]. If tx rolls back, the
// claim is still held: [Store.Release] it (outside tx) so that the
// redelivery can run at once. The record's row stays locked until tx ends,
// so keep the transaction short of the lease. A deadlock the database broke
// by rolling tx back is returned, not retried: the rollback took the
// caller's work too, and the caller retries its transaction.
func (s *Store) CompleteTx(ctx context.Context, tx *sql.Tx, t dedupe.Ticket, retention time.Duration) error {
	what := fmt.Sprintf("complete %q", t.Ref)
	if tx == nil {
		return fmt.Errorf("sqldedupe: %s: %w", what, errNilTx)
	}
	return one(s.complete(ctx, runner{s: s, tx: tx}, what, []dedupe.Ticket{t}, retention))
}

// errNilTx is what CompleteTx answers for a nil transaction, rather than
// writing outside one.
var errNilTx = errors.New("nil *sql.Tx")
