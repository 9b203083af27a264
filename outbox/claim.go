package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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

// claimHook, when set (by tests), runs inside each claim on MySQL and
// PostgreSQL while it holds the claim lock, after the choice and before the
// lease.
var claimHook func()

// lockWait bounds how long a claim waits for the claim lock before it
// gives up and finds no rows, to try again later.
const lockWait = 10 * time.Second

// claimHold is how long the database waits, within a claim, for the relay's
// next statement before it ends the claim's session, which drops the claim
// lock: a relay stopped inside a claim (SIGSTOP, a frozen VM, a debugger)
// holds up the other relays for that long, not for as long as it is
// stopped. A claim's statements follow each other within milliseconds; a
// relay that pauses longer (a long GC pause) fails that claim and claims
// again. A fifth of the lease, and at least a second, the granularity of
// MySQL's timeouts.
func claimHold(lease time.Duration) time.Duration { return max(lease/5, time.Second) }

// claim leases at most n shippable rows to owner for lease and returns them
// by id. Claims are serialized across relays (a PostgreSQL advisory lock
// held by the claiming transaction, a MySQL named lock, SQLite's single
// writer), so that each one sees the leases of the claims before it and
// takes a key's rows only while no other relay holds an earlier one.
//
// On MySQL and PostgreSQL the database ends a claim whose relay falls
// silent for [claimHold] while it holds the lock (idle_in_transaction_-
// session_timeout on the claim's transaction; wait_timeout and
// net_write_timeout on its session), so a stopped relay holds up the others
// for that long at most. When it wakes, its next statement fails on the
// ended session: it leases nothing it chose before it stopped (on
// PostgreSQL the lease is undone with the transaction; on MySQL it had not
// been sent). While the lock is held, results stay small (ids, ordering
// keys): a PostgreSQL backend writing a large result to a stopped relay is
// not idle, and no timeout would end it. The messages are read after the
// lock is released ([queries.leased]).
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
	ids, runs, err := func() ([]int64, []span, error) {
		// Read committed, whatever the database's default: the claim must
		// see the claims committed while it waited for the lock.
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, nil, err
		}
		defer tx.Rollback()
		// The timeouts are the transaction's own (set_config's true), set
		// before the lock is taken (the subquery runs first: its volatile
		// functions keep it from being flattened). The lock's two keys: a
		// class of idemq's own, then the table, so that no other user of
		// advisory locks shares it.
		ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(1768189297, hashtext($1))
FROM (SELECT set_config('idle_in_transaction_session_timeout', $2, true), set_config('lock_timeout', $3, true)) t`,
			q.name, ms(claimHold(lease)), ms(lockWait)); err != nil {
			if sqldialect.LockTimeout(err) {
				return nil, nil, nil // another relay claims for long: try again later
			}
			return nil, nil, err
		}
		ids, runs, err := q.chooseAndLease(ctx, tx, owner, lease, n)
		if err != nil || len(ids) == 0 {
			return nil, nil, err
		}
		return ids, runs, tx.Commit()
	}()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return q.leased(ctx, db, owner, ids, runs)
}

// claimMySQL chooses and leases rows under a named lock. The lock belongs
// to the session, so a relay that dies mid-claim drops it with its
// connection, and so does one that stops: the session's timeouts are
// [claimHold] while it holds the lock, and the server's own again after.
func (q queries) claimMySQL(ctx context.Context, db *sql.DB, owner string, lease time.Duration, n int) ([]row, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ids, runs, err := func() ([]int64, []span, error) {
		hold := strconv.FormatInt(int64((claimHold(lease)+time.Second-1)/time.Second), 10)
		if _, err := conn.ExecContext(ctx, `SET SESSION wait_timeout = `+hold+`, SESSION net_write_timeout = `+hold); err != nil {
			return nil, nil, err
		}
		const name = `CONCAT('idemq_outbox:', SHA1(CONCAT(IFNULL(DATABASE(), ''), '.', ?)))`
		// Released, and the timeouts restored, even when ctx ends (the
		// connection goes back to the pool): on failure the session is
		// likely gone, and with it the lock.
		defer conn.ExecContext(context.WithoutCancel(ctx), `SET @idemq_outbox_unlocked = RELEASE_LOCK(`+name+`),
SESSION wait_timeout = @@GLOBAL.wait_timeout, SESSION net_write_timeout = @@GLOBAL.net_write_timeout`, q.name)
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(`+name+`, `+strconv.Itoa(int(lockWait/time.Second))+`)`, q.name).Scan(&got); err != nil {
			return nil, nil, err
		}
		if got.Int64 != 1 {
			return nil, nil, nil // another relay claims for long: try again later
		}
		return q.chooseAndLease(ctx, conn, owner, lease, n)
	}()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return q.leased(ctx, conn, owner, ids, runs)
}

// chooseAndLease chooses rows ([queries.choose]) and leases them to owner,
// under the claim lock, and returns them as ids and spans.
func (q queries) chooseAndLease(ctx context.Context, db querier, owner string, lease time.Duration, n int) ([]int64, []span, error) {
	ids, runs, err := q.choose(ctx, db, n)
	if err != nil || len(ids) == 0 {
		return nil, nil, err
	}
	if claimHook != nil {
		claimHook()
	}
	if err := q.lease(ctx, db, owner, lease, ids, runs); err != nil {
		return nil, nil, err
	}
	return ids, runs, nil
}

// lease leases the rows [queries.choose] chose, ids and runs, to owner, if
// still pending and free. Its spans may take rows committed after the
// choice read past them: [queries.leased] hands those back.
func (q queries) lease(ctx context.Context, db querier, owner string, lease time.Duration, ids []int64, runs []span) error {
	_, err := db.ExecContext(ctx, q.claimIDs(len(runs)), q.changeArgs(runs, len(ids), owner, sqldialect.Micros(lease))...)
	return err
}

// leased returns the rows owner leased of those [queries.choose] chose, ids
// and runs: an operator may have changed rows between the choice and the
// lease. Rows inside the runs that it did not choose, committed after it
// read past their ids, are handed back in the same go (see keepChosen).
func (q queries) leased(ctx context.Context, db querier, owner string, ids []int64, runs []span) ([]row, error) {
	rs, err := db.QueryContext(ctx, q.owned(len(runs)), spanArgs(runs, owner)...)
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
