package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
)

// cleanupBatch is the most rows one cleanup statement deletes, which bounds
// how long it holds locks.
const cleanupBatch = 1000

// cleanup deletes the rows marked sent more than retention ago, in bounded
// statements, and returns how many it deleted. A [Relay] runs it every
// [RelayConfig.CleanupInterval].
func (o *Outbox) cleanup(ctx context.Context, retention time.Duration) (int64, error) {
	var total int64
	for {
		res, err := o.db.ExecContext(ctx, o.q.cleanup(), -sqldialect.Micros(retention), cleanupBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: cleanup: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("outbox: cleanup: %w", err)
		}
		total += n
		if n < cleanupBatch {
			return total, nil
		}
	}
}

// Counts is what an outbox table holds, counted when asked ([Outbox.Count]).
type Counts struct {
	Pending int64 // rows not shipped yet
	Sent    int64 // rows marked sent, kept for their retention
	Parked  int64 // rows parked for an operator
	// OldestPending is the age of the oldest pending row, by the
	// database's clock; zero without one.
	OldestPending time.Duration
}

// Count counts the table's rows by state, by a query: a relay's own
// counters are [Relay.Stats].
func (o *Outbox) Count(ctx context.Context) (Counts, error) {
	syn := o.q.syn
	rs, err := o.db.QueryContext(ctx, `SELECT state, COUNT(*), `+syn.UnixMicros(syn.Now())+` - MIN(`+syn.UnixMicros("created_at")+`)
FROM `+o.q.table+` GROUP BY state`)
	if err != nil {
		return Counts{}, fmt.Errorf("outbox: count: %w", err)
	}
	defer rs.Close()
	var s Counts
	for rs.Next() {
		var (
			state int
			n     int64
			age   sql.NullInt64
		)
		if err := rs.Scan(&state, &n, &age); err != nil {
			return Counts{}, fmt.Errorf("outbox: count: %w", err)
		}
		switch state {
		case statePending:
			s.Pending, s.OldestPending = n, time.Duration(age.Int64)*time.Microsecond
		case stateSent:
			s.Sent = n
		case stateParked:
			s.Parked = n
		}
	}
	if err := rs.Err(); err != nil {
		return Counts{}, fmt.Errorf("outbox: count: %w", err)
	}
	return s, nil
}
