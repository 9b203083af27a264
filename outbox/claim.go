package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
)

// row is a claimed row.
type row struct {
	id       int64
	msg      Message
	attempts int
}

// claim leases at most n shippable rows to owner for lease and returns them
// by id. Claims are serialized across relays (a PostgreSQL advisory lock
// held by the claiming transaction, a MySQL named lock, SQLite's single
// writer), so that each one sees the leases of the claims before it and
// takes a key's rows only while no other relay holds an earlier one.
func (q queries) claimRows(ctx context.Context, db *sql.DB, owner string, lease time.Duration, n int) ([]row, error) {
	var (
		rows []row
		err  error
	)
	switch q.d {
	case sqldialect.Postgres:
		rows, err = q.claimPostgres(ctx, db, owner, lease, n)
	case sqldialect.MySQL:
		rows, err = q.claimMySQL(ctx, db, owner, lease, n)
	default:
		var rs *sql.Rows
		if rs, err = db.QueryContext(ctx, q.claim(), owner, sqldialect.Micros(lease), n); err == nil {
			rows, err = scanRows(rs)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	slices.SortFunc(rows, func(a, b row) int { return int(a.id - b.id) })
	return rows, nil
}

func (q queries) claimPostgres(ctx context.Context, db *sql.DB, owner string, lease time.Duration, n int) ([]row, error) {
	// Read committed, whatever the database's default: the claim must see
	// the claims committed while it waited for the lock.
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	// Two keys: a class of idemq's own, then the table, so that no other
	// user of advisory locks shares it.
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(1768189297, hashtext($1))`, q.name); err != nil {
		return nil, err
	}
	ids, runs, err := q.choose(ctx, tx, n)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	rows, err := q.lease(ctx, tx, owner, lease, ids, runs)
	if err != nil {
		return nil, err
	}
	return rows, tx.Commit()
}

// claimMySQL chooses and leases rows under a named lock. The lock belongs
// to the session, so a relay that dies mid-claim drops it with its
// connection.
func (q queries) claimMySQL(ctx context.Context, db *sql.DB, owner string, lease time.Duration, n int) ([]row, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	const name = `CONCAT('idemq_outbox:', SHA1(CONCAT(IFNULL(DATABASE(), ''), '.', ?)))`
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(`+name+`, 10)`, q.name).Scan(&got); err != nil {
		return nil, err
	}
	if got.Int64 != 1 {
		return nil, nil // another relay claims for long: try again later
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `DO RELEASE_LOCK(`+name+`)`, q.name)
	ids, runs, err := q.choose(ctx, conn, n)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return q.lease(ctx, conn, owner, lease, ids, runs)
}

// lease leases the rows [queries.choose] chose, ids and runs, to owner and
// returns them. Rows inside the runs that it did not choose, committed
// after it read past their ids, are handed back in the same go (see
// keepChosen).
func (q queries) lease(ctx context.Context, db querier, owner string, lease time.Duration, ids []int64, runs []span) ([]row, error) {
	args := q.changeArgs(runs, len(ids), owner, sqldialect.Micros(lease))
	var (
		rs  *sql.Rows
		err error
	)
	if q.d == sqldialect.Postgres {
		rs, err = db.QueryContext(ctx, q.claimIDs(len(runs)), args...)
	} else if _, err = db.ExecContext(ctx, q.claimIDs(len(runs)), args...); err == nil {
		// Those the lease took: an operator may have changed rows between
		// the choice and the lease.
		rs, err = db.QueryContext(ctx, q.owned(len(runs)), spanArgs(runs, owner)...)
	}
	if err != nil {
		return nil, err
	}
	rows, err := scanRows(rs)
	if err != nil {
		return nil, err
	}
	rows, extra := keepChosen(rows, ids)
	if len(extra) > 0 {
		if _, err := db.ExecContext(ctx, q.release(len(extra)), q.changeArgs(extra, len(extra), owner)...); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// querier is a connection or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// choose returns the ids of the first n pending rows by id that a claim
// may take, by the rule of [queries.candidates]: a row due and not leased,
// unless an earlier pending row of its ordering key is not due, is leased
// or has failed before. It reads the pending rows in id order, a page at a
// time and without their messages, so that each claim reads each row
// once: the candidates query, which looks back over a key's earlier rows
// for each row, costs the square of a key's backlog. It returns the ids
// as spans too, each a run of rows it read one after another and took
// all of.
func (q queries) choose(ctx context.Context, db querier, n int) ([]int64, []span, error) {
	var (
		ids     []int64
		runs    spanList
		took    bool // the row read before was taken
		blocked = map[string]bool{}
		after   int64
		page    = 2 * n
	)
	for {
		rs, err := db.QueryContext(ctx, q.pending(), after, page)
		if err != nil {
			return nil, nil, err
		}
		read := 0
		for rs.Next() {
			var (
				id       int64
				ordering string
				attempts int
				free     int
			)
			if err := rs.Scan(&id, &ordering, &attempts, &free); err != nil {
				rs.Close()
				return nil, nil, err
			}
			read, after = read+1, id
			if len(ids) == n || ordering != "" && blocked[ordering] {
				took = false
				continue
			}
			if free == 1 {
				ids = append(ids, id)
				runs.add(id, took)
			}
			took = free == 1
			if ordering != "" && (free == 0 || attempts > 0) {
				blocked[ordering] = true
			}
		}
		if err := rs.Close(); err != nil {
			return nil, nil, err
		}
		if len(ids) == n || read < page {
			return ids, runs, nil
		}
	}
}

// span is the ids from lo to hi. A statement names a claim's rows by spans
// (see [spans]), with the owner or the lease's conditions to leave out the
// rows inside them that are not the claim's.
type span struct{ lo, hi int64 }

// spanList builds spans from ascending ids.
type spanList []span

// add extends the last span to id if next says id follows it with no row
// between them that the spans must leave out, else starts a span.
func (l *spanList) add(id int64, next bool) {
	if next && len(*l) > 0 {
		(*l)[len(*l)-1].hi = id
		return
	}
	*l = append(*l, span{id, id})
}

// spanArgs returns first, then each span's bounds, as statement arguments.
func spanArgs(ss []span, first ...any) []any {
	args := append(make([]any, 0, len(first)+2*len(ss)), first...)
	for _, s := range ss {
		args = append(args, s.lo, s.hi)
	}
	return args
}

// keepChosen returns the rows a lease took whose ids are among chosen
// (ascending), and the others as spans: rows that fell inside a span of
// the choice but were committed after it read past their ids. Those go
// back at once, as the choice did not look at their ordering keys.
func keepChosen(rows []row, chosen []int64) ([]row, []span) {
	var (
		kept  []row
		extra spanList
	)
	for _, r := range rows {
		if _, ok := slices.BinarySearch(chosen, r.id); ok {
			kept = append(kept, r)
		} else {
			extra.add(r.id, false)
		}
	}
	return kept, extra
}

// scanRows reads rows of [columns] and closes rs.
func scanRows(rs *sql.Rows) ([]row, error) {
	defer rs.Close()
	var rows []row
	for rs.Next() {
		var (
			r           row
			keys, props string
		)
		if err := rs.Scan(&r.id, &r.msg.Topic, &r.msg.Tags, &keys, &r.msg.OrderingKey, &props, &r.msg.Body, &r.attempts); err != nil {
			return nil, err
		}
		r.msg.Keys = strings.Fields(keys)
		if err := json.Unmarshal([]byte(props), &r.msg.Properties); err != nil {
			return nil, fmt.Errorf("row %d: properties: %w", r.id, err)
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
}
