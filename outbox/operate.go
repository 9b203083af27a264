package outbox

import (
	"context"
	"fmt"
	"time"
)

// State is where a row is in its life, by name.
type State string

// The states of a row.
const (
	Pending State = "pending" // waiting to ship (or for its backoff)
	Sent    State = "sent"    // shipped, kept for its retention
	Parked  State = "parked"  // set aside: refused, out of attempts, or parked by an operator
)

// states are the States by the code a row's state column holds.
var states = [...]State{statePending: Pending, stateSent: Sent, stateParked: Parked}

// code is s's code in the state column, or -1 for no State.
func (s State) code() int {
	for c, st := range states {
		if st == s {
			return c
		}
	}
	return -1
}

// Row is a row of the table as an operator sees it.
type Row struct {
	ID          int64
	State       State
	Key         string // the message key
	Topic       string
	OrderingKey string
	Attempts    int    // failed sends
	LastError   string // the last failure's, or the parking's, reason
	// Age is how long ago the row was added, by the database's clock.
	Age time.Duration
}

// List returns at most limit rows in state, oldest first, from the one
// after id after (0: from the first).
func (o *Outbox) List(ctx context.Context, state State, after int64, limit int) ([]Row, error) {
	return o.rows(ctx, "list", `state = ? AND id > ? ORDER BY id LIMIT ?`, state.code(), after, limit)
}

// Find returns the rows that hold the message key key, oldest first: one,
// unless the same key was added again. No index covers the key (one would
// cost every Add a write), so the database reads the whole table: a tool
// for an operator's question (`idemq key`), not for a program's hot path.
func (o *Outbox) Find(ctx context.Context, key string) ([]Row, error) {
	return o.rows(ctx, "find", `k = ? ORDER BY id`, key)
}

// rows returns the rows that the WHERE clause where selects; what names
// the operation in errors.
func (o *Outbox) rows(ctx context.Context, what, where string, args ...any) ([]Row, error) {
	syn := o.q.syn
	rs, err := o.db.QueryContext(ctx, syn.Rebind(`SELECT id, state, k, topic, ordering, attempts, last_error, `+
		syn.UnixMicros(syn.Now())+` - `+syn.UnixMicros("created_at")+`
FROM `+o.q.table+` WHERE `+where), args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: %s: %w", what, err)
	}
	defer rs.Close()
	var rows []Row
	for rs.Next() {
		var (
			r     Row
			state int
			age   int64
		)
		if err := rs.Scan(&r.ID, &state, &r.Key, &r.Topic, &r.OrderingKey, &r.Attempts, &r.LastError, &age); err != nil {
			return nil, fmt.Errorf("outbox: %s: %w", what, err)
		}
		if state >= 0 && state < len(states) {
			r.State = states[state]
		}
		r.Age = time.Duration(age) * time.Microsecond
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("outbox: %s: %w", what, err)
	}
	return rows, nil
}

// Retry puts parked rows back to ship at once, their attempts forgotten,
// and returns how many it put back: the rows ids name, or every parked row
// without ids. A retried row ships behind the pending rows of its ordering
// key that came before it, and ahead of those after it.
func (o *Outbox) Retry(ctx context.Context, ids ...int64) (int64, error) {
	return o.operate(ctx, "retry", `UPDATE `+o.q.table+` SET state = 0, attempts = 0, due_at = `+o.q.syn.Now()+`
WHERE state = 2`, nil, ids)
}

// Park sets pending rows that no relay holds aside with reason, and
// returns how many it parked: the rows ids name, or every such row
// without ids. A parked row ships no more until [Outbox.Retry], and holds
// back no row of its ordering key.
func (o *Outbox) Park(ctx context.Context, reason string, ids ...int64) (int64, error) {
	return o.operate(ctx, "park", `UPDATE `+o.q.table+` SET state = 2, last_error = ?
WHERE state = 0 AND lease_until <= `+o.q.syn.Now(), []any{reason}, ids)
}

// operate runs an operator's UPDATE, narrowed to ids if there are any.
func (o *Outbox) operate(ctx context.Context, what, query string, args []any, ids []int64) (int64, error) {
	if len(ids) > 0 {
		query += ` AND id IN (` + list("?", len(ids)) + `)`
		for _, id := range ids {
			args = append(args, id)
		}
	}
	res, err := o.db.ExecContext(ctx, o.q.syn.Rebind(query), args...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("outbox: %s: %w", what, err)
}
