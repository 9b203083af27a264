package sqldedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// CompleteTx marks t done for retention inside tx, so the record commits or
// rolls back with the caller's own writes in tx: a handler whose effects live
// in the same database applies them exactly once. It is [Store.Complete]
// otherwise, with the same errors; ErrLeaseLost means tx must roll back.
//
// tx must have begun on the *sql.DB given to [New]. If tx rolls back, the
// claim is still held: [Store.Release] it (outside tx) so that the
// redelivery can run at once. The record's row stays locked until tx ends,
// so keep the transaction short of the lease.
func (s *Store) CompleteTx(ctx context.Context, tx *sql.Tx, t dedupe.Ticket, retention time.Duration) error {
	what := fmt.Sprintf("complete %q", t.Ref)
	if tx == nil {
		return fmt.Errorf("sqldedupe: %s: %w", what, errNilTx)
	}
	return one(s.complete(ctx, runner{s: s, tx: tx}, what, []dedupe.Ticket{t}, retention))
}

// CompleteBatchTx is [Store.CompleteTx] for a batch: one statement inside tx
// for the whole batch, whatever its size up to 256 keys. Per-ticket errors are
// ErrInvalidKey and ErrLeaseLost; tickets that lost their lease must not
// have their effects committed, so roll tx back or leave their writes out.
func (s *Store) CompleteBatchTx(ctx context.Context, tx *sql.Tx, ts []dedupe.Ticket, retention time.Duration) ([]error, error) {
	what := fmt.Sprintf("complete batch of %d", len(ts))
	if tx == nil {
		return nil, fmt.Errorf("sqldedupe: %s: %w", what, errNilTx)
	}
	return s.complete(ctx, runner{s: s, tx: tx}, what, ts, retention)
}

// MarkDoneTx records ref as done for retention inside tx, without a claim: a
// handler that does its work in one transaction calls it first and commits
// only if it succeeds. It fails with [ErrDuplicate] if ref is already done
// (roll back and acknowledge the message), with dedupe.ErrInFlight if a live
// claim holds it (roll back and retry later) and with dedupe.ErrInvalidKey
// for a bad ref. A done record whose retention ended, or a claim whose lease
// ended, is taken over.
//
// Two transactions marking one key serialise on its row: the second waits
// until the first ends, then fails with ErrDuplicate if the first committed
// and succeeds if it rolled back. tx must have begun on the *sql.DB given to
// [New].
func (s *Store) MarkDoneTx(ctx context.Context, tx *sql.Tx, ref dedupe.Ref, retention time.Duration) error {
	return one(s.markDone(ctx, tx, fmt.Sprintf("mark done %q", ref), []dedupe.Ref{ref}, retention))
}

// MarkDoneBatchTx is [Store.MarkDoneTx] for a batch, with one statement inside
// tx per batch of distinct keys (two on MySQL when a key was not free).
// Per-key errors are ErrDuplicate, dedupe.ErrInFlight and
// dedupe.ErrInvalidKey; the keys without an error are marked.
func (s *Store) MarkDoneBatchTx(ctx context.Context, tx *sql.Tx, refs []dedupe.Ref, retention time.Duration) ([]error, error) {
	return s.markDone(ctx, tx, fmt.Sprintf("mark done batch of %d", len(refs)), refs, retention)
}

func (s *Store) markDone(ctx context.Context, tx *sql.Tx, what string, refs []dedupe.Ref, retention time.Duration) ([]error, error) {
	var err error
	switch {
	case tx == nil:
		err = errNilTx
	case retention <= 0:
		err = fmt.Errorf("retention %v must be positive", retention)
	}
	if err := start(ctx, err); err != nil {
		return nil, fmt.Errorf("sqldedupe: %s: %w", what, err)
	}
	errs := make([]error, len(refs))
	var (
		rows []upsertRow
		idx  []int
	)
	for i, ref := range refs {
		if err := ref.Validate(); err != nil {
			errs[i] = fmt.Errorf("sqldedupe: mark done %q: %w", ref, err)
			continue
		}
		rows = append(rows, upsertRow{ref: ref, dur: retention})
		idx = append(idx, i)
	}
	res, err := s.upsert(ctx, runner{s: s, tx: tx}, stateDone, rows)
	if err != nil {
		return nil, fail(ctx, what, err)
	}
	for j, i := range idx {
		switch res[j].Status {
		case dedupe.Acquired:
		case dedupe.Done:
			errs[i] = fmt.Errorf("sqldedupe: mark done %q: %w", refs[i], ErrDuplicate)
		default: // without a fingerprint, nothing conflicts: a live claim holds it
			errs[i] = fmt.Errorf("sqldedupe: mark done %q: %w for %v more", refs[i], dedupe.ErrInFlight, res[j].Remaining)
		}
	}
	return errs, nil
}

// errNilTx is what the Tx methods answer for a nil transaction, rather than
// writing outside one.
var errNilTx = errors.New("nil *sql.Tx")
