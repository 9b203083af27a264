package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemq/idemq/dedupe"
)

// TxHandler processes one message inside tx, a transaction on the database
// given to [Consumer.Tx]. A nil error commits its writes together with the
// record that the message is done; any error (or panic) rolls both back and
// asks for a redelivery. It must neither commit nor roll back tx.
type TxHandler func(ctx context.Context, tx *sql.Tx, msg *Message) error

// Tx returns a [Handler] that applies h's writes exactly once: it begins a
// transaction on db, runs h in it, records the message's key done in the
// same transaction and commits. Run the result as any handler, through a
// client adapter. The Consumer's store must record keys in db: a
// [dedupe.TxCompleter] such as *sqldedupe.Store.
//
// The key is claimed first, as for any handler: a key already done is
// acknowledged and one held by another consumer is waited for. Then, per
// run:
//
//   - success: h's writes and the record commit, then the message is
//     acknowledged;
//   - an error or panic in h, a failed record or a failed commit: the
//     transaction rolls back, the claim is released and the message is
//     retried, so the redelivery runs at once;
//   - a lease lost before the commit (another consumer may have taken the
//     key over): recording fails with [dedupe.ErrLeaseLost] inside the
//     transaction, or h's context is cancelled, and the transaction rolls
//     back: the other consumer's run is the one that counts. Once
//     recorded, the key's row stays locked until the commit, so no one can
//     take it over in between;
//   - a commit whose answer was lost: the message is retried, and the
//     record tells the redelivery what happened: done if the commit took
//     effect, free to run again if not.
//
// So h's writes through the transaction are applied exactly once; anything
// else it does (a call to another service, a message sent) is not covered
// and may run once per attempt. With [dedupe.GuardConfig.FailOpen] and the
// store unreachable, the transaction commits without a record.
func (c *Consumer) Tx(db *sql.DB, h TxHandler) (Handler, error) {
	if db == nil || h == nil {
		return nil, errors.New("consumer: Tx: nil *sql.DB or handler")
	}
	store, ok := c.store.(dedupe.TxCompleter)
	if !ok {
		return nil, fmt.Errorf("consumer: Tx: the store (%T) cannot record keys in a transaction; use a SQL store (sqldedupe) on the same database", c.store)
	}
	return func(ctx context.Context, msg *Message) error {
		return inTx(ctx, db, store, h, msg)
	}, nil
}

// inTx runs h in a transaction that also records the claim the Guard holds
// in ctx. An error means that nothing was committed, except after a failed
// Commit, whose outcome is unknown: then the record tells the redelivery
// (the Guard's release of a done key changes nothing).
func inTx(ctx context.Context, db *sql.DB, store dedupe.TxCompleter, h TxHandler, msg *Message) error {
	// ctx is cancelled once the Guard learns that the lease was lost, which
	// makes database/sql roll the transaction back.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("consumer: begin transaction: %w", err)
	}
	// Undoes everything on an error or a panic in h; a no-op after Commit.
	defer tx.Rollback()
	if err := h(ctx, tx, msg); err != nil {
		return err
	}
	// Without a claim the Guard runs h unguarded (FailOpen), and there is
	// nothing to record.
	if _, claimed := dedupe.TicketFromContext(ctx); claimed {
		// Last, so that the record's row stays locked for as short as can be.
		// A lease lost by now fails here and rolls h's writes back.
		if err := dedupe.CompleteTx(ctx, tx, store); err != nil {
			return fmt.Errorf("consumer: record in transaction: %w", withCause(ctx, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("consumer: commit: %w", withCause(ctx, err))
	}
	return nil
}

// withCause adds why ctx ended to err: a bare "context canceled" would hide
// that the Guard cancelled it because the lease was lost.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}
