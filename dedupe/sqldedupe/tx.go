package sqldedupe

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/sqldialect"
)

var _ dedupe.TxClaimer = (*Store)(nil)

// BeginTx implements [dedupe.TxClaimer]: it begins a transaction on the
// *sql.DB given to [New], with the database's default isolation. On SQLite
// a transaction begun IMMEDIATE (the DSN the package documentation shows)
// waits here for the database's write lock, as long as the connection's
// busy timeout, and past it fails with [dedupe.ErrBusy].
func (s *Store) BeginTx(ctx context.Context) (*sql.Tx, error) {
	if s.db.Stats().MaxOpenConnections != 0 {
		// Prepared now, while this call holds no connection: inside the
		// transaction, on a bounded pool, the claim takes only a statement
		// prepared before (see runner.stmt), and would otherwise go
		// unprepared every time (on MySQL, without interpolateParams, a
		// round trip more). A failure here is the claim's to report.
		s.stmts.get(ctx, s.db, s.d.claimTxSQL())
	}
	tx, err := s.db.BeginTx(ctx, nil)
	switch {
	case err == nil:
		return tx, nil
	case sqldialect.LockTimeout(err):
		return nil, fmt.Errorf("sqldedupe: begin: %w: %w", dedupe.ErrBusy, err)
	}
	return nil, fail(ctx, "begin", err)
}

// ClaimTx implements [dedupe.TxClaimer] with one statement (MySQL reads
// the record that answers a key it did not acquire in a second): the
// upsert of [Store.Claim], writing the record done for retention. It is
// the claim of the consumer's transactional mode (consumer.Consumer.Tx), and
// tx is that of the handler, which must have begun on the *sql.DB given
// to [New] (see [Store.BeginTx]), with this as its first statement.
//
// A duplicate of a key that another transaction has claimed waits for that
// transaction's outcome: done if it commits, the key's if it rolls back.
// It waits no longer than [Config.LockTimeout], which applies to this
// statement alone; past it, or when the database rolls tx back to break a
// deadlock or a serialization conflict, ClaimTx fails with
// [dedupe.ErrBusy]. On SQLite, which has one writer at a time, a
// transaction holds the write lock from its first write, or from BEGIN
// IMMEDIATE, to its end: a duplicate then waits at its own BEGIN or claim
// for the whole database, as long as the connection's busy timeout, and
// SQLITE_BUSY past it is ErrBusy too.
//
// Records written by [Store.Claim] share the table: a live lease another
// owner took with Claim answers Busy, with the time it has left, and an
// expired record is taken over.
func (s *Store) ClaimTx(ctx context.Context, tx *sql.Tx, it dedupe.Item, retention time.Duration) (dedupe.ClaimResult, error) {
	// Formatted on failure only: this is every message's path.
	what := func() string { return fmt.Sprintf("claim %q in a transaction", it.Ref) }
	var err error
	switch {
	case retention <= 0:
		err = fmt.Errorf("retention %v must be positive", retention)
	case tx == nil:
		err = errNilTx
	default:
		err = dedupekit.CheckClaim(it.Namespace, it.Group, it.Key, retention, it.Fingerprint)
	}
	if err := start(ctx, err); err != nil {
		return dedupe.ClaimResult{}, fmt.Errorf("sqldedupe: %s: %w", what(), err)
	}
	row := upsertRow{ref: it.Ref, fp: it.Fingerprint, lease: retention, token: rand.Text()}
	rec, err := s.d.claimTx(ctx, runner{s: s, tx: tx}, row)
	switch {
	case err == nil:
		return answer(row, rec), nil
	case ctx.Err() == nil && (sqldialect.LockTimeout(err) || sqldialect.RolledBack(err)):
		return dedupe.ClaimResult{}, fmt.Errorf("sqldedupe: %s: %w: %w", what(), dedupe.ErrBusy, err)
	}
	return dedupe.ClaimResult{}, fail(ctx, what(), err)
}

// errNilTx is what ClaimTx answers for a nil transaction, rather than
// writing outside one.
var errNilTx = errors.New("nil *sql.Tx")
