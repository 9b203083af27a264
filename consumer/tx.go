package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
)

// TxHandler processes one message inside tx, a transaction on the database
// given to [DedupeTx]. A nil error commits its writes together with the
// record that the message is done; any error (or panic) rolls both back and
// asks for a redelivery. It must neither commit nor roll back tx.
type TxHandler func(ctx context.Context, tx *sql.Tx, msg *primitive.MessageExt) error

// TxStore is a dedupe store that can record a key done inside a caller's
// transaction, such as *sqldedupe.Store.
type TxStore interface {
	dedupe.Store
	dedupe.TxCompleter
}

// DedupeTx returns an adapter that deduplicates a [TxHandler] per (group,
// key) as [Dedupe] does a Handler, and applies its writes exactly once: it
// begins a transaction on db, runs the handler in it, records the key done in
// the same transaction and commits. store must keep its records in db. opts
// are Dedupe's. See "Exactly-once effects with SQL" in the package
// documentation.
func DedupeTx(db *sql.DB, store TxStore, group string, opts ...Option) (func(TxHandler) Handler, error) {
	if db == nil {
		return nil, errors.New("consumer: nil *sql.DB")
	}
	dd, err := Dedupe(store, group, opts...)
	if err != nil {
		return nil, err
	}
	return func(h TxHandler) Handler {
		return dd(func(ctx context.Context, msg *primitive.MessageExt) error {
			return inTx(ctx, db, store, h, msg)
		})
	}, nil
}

// inTx runs h in a transaction that also records the claim the Guard holds
// in ctx. An error means that nothing was committed, except after a failed
// Commit, whose outcome is unknown: then the record tells the redelivery
// (the Guard's release of a done key changes nothing).
func inTx(ctx context.Context, db *sql.DB, store dedupe.TxCompleter, h TxHandler, msg *primitive.MessageExt) error {
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
