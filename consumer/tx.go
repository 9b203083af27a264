package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemq/idemq/dedupe"
)

// Tx makes the Consumer transactional, and returns a [Handler] that runs h
// in the transaction of each message: run it as any handler, through a
// client adapter, on c. The effects h writes to the database that the
// store keeps its records in are applied exactly once, at one commit per
// message.
//
// h processes one message inside tx, the transaction whose first statement
// claimed the message's key. A nil error commits its writes together with
// the record that the message is done; any error (or panic) rolls both
// back and asks for a redelivery. It must neither commit nor roll back tx.
//
// The mode is the Consumer's, chosen once: call Tx before the client
// delivers the first message (Tx fails once a message ran without a
// transaction), as often as there are handlers. The store must be a
// [dedupe.TxClaimer], such as *sqldedupe.Store; Tx fails otherwise.
//
// Each message runs in a transaction of its own on that database (the
// guard's transactional mode, [dedupe.GuardConfig.Tx]), whose first
// statement inserts the message's key, done; h writes through it. Then:
//
//   - success: one commit applies the handler's writes and records the
//     key, and the message is acknowledged;
//   - an error or panic in the handler, or a failed commit: the
//     transaction rolls back, the key's record with the writes, and the
//     message is retried; the redelivery runs at once. A commit whose
//     answer was lost is retried too, and its redelivery finds the key
//     done if the commit took effect;
//   - a redelivery of a done key is acknowledged (suppressed);
//   - a duplicate delivered while another transaction holds the key waits
//     on the key's row lock for that transaction's outcome: suppressed if
//     it commits, run if it rolls back. Past the store's lock timeout
//     (sqldedupe.Config.LockTimeout) the key is busy, and is waited for
//     in process as any busy key ([WithBusyWait]): a holder stalled (not
//     dead) for less than the busy wait costs the duplicate no retry, and
//     none ever costs it its last. How long the holder goes on is
//     unknown, so a busy key handed back returns at the first delay
//     level;
//   - a consumer that dies mid-handler leaves nothing behind: the database
//     rolls its transaction back when its connection closes, and the
//     redelivery finds the key free at once.
//
// The row lock is the lease: it holds the key until the transaction ends,
// however long the handler runs, so [dedupe.GuardConfig]'s Lease (which
// still sets WithBusyWait's default), ExtendEvery and CleanupTimeout do
// not apply, and no message is ever lease-lost or unrecorded. A key that
// a Consumer without transactions claims in the same table is busy until
// its lease ends, and done keys and expired records are shared alike.
// With FailOpen, a claim that fails runs the handler in a transaction
// without a record: unguarded.
//
// The handler's writes through the transaction are applied exactly once;
// anything else it does (a call to another service, a message sent) is
// not covered and may run once per attempt. Every handler of a
// transactional Consumer runs in a transaction, a plain [Handler] too (it
// then holds its key in it), and the messages of a batch take one
// transaction each.
func (c *Consumer) Tx(h func(ctx context.Context, tx *sql.Tx, msg *Message) error) (Handler, error) {
	if h == nil {
		return nil, errors.New("consumer: Tx: nil handler")
	}
	if err := c.makeTx(); err != nil {
		return nil, err
	}
	return func(ctx context.Context, msg *Message) error {
		_, tx, _ := dedupe.ClaimFromContext(ctx)
		if tx == nil {
			return errNoTx
		}
		return h(ctx, tx, msg)
	}, nil
}

// makeTx puts the Consumer's guard in its transactional mode, unless the
// mode is decided already (see [Consumer.guard]).
func (c *Consumer) makeTx() error {
	c.txMu.Lock()
	defer c.txMu.Unlock()
	switch c.mode.Load() {
	case modeTx:
		return nil
	case modePlain:
		return errRanPlain
	}
	cfg := c.options.guard
	cfg.Tx = true
	g, err := dedupe.NewGuard(c.store, cfg)
	if err != nil {
		return fmt.Errorf("consumer: Tx: %w", err)
	}
	c.txg = g // before the mode, which publishes it
	if !c.mode.CompareAndSwap(modeUnset, modeTx) {
		return errRanPlain
	}
	return nil
}

// errNoTx is the answer of a Tx handler run where no transaction is: by
// another Consumer, or called directly.
var errNoTx = errors.New("consumer: Tx handler run without its transaction; run it through the Consumer whose Tx made it")

// errRanPlain is the answer of Tx once the Consumer's mode is decided
// plain.
var errRanPlain = errors.New("consumer: Tx: the Consumer has run messages without transactions; call Tx before the client delivers")
