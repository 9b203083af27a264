package sqldedupe

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/sqldialect"
)

// mysql speaks MySQL and MariaDB. Batches travel as row lists, so a
// statement's text depends on its batch size.
//
// Times leave the database as µs since the Unix epoch, so the DSN's
// parseTime and loc do not matter.
//
// Keys are VARBINARY: compared byte for byte. The utf8mb4_bin collation
// would also ignore trailing spaces ("a" = "a "), and its no-pad variants
// are named differently in MySQL and MariaDB.
type mysql struct {
	table string // quoted
	ddl   []string
	// claimSQL is the claim in a transaction, with MariaDB's SET
	// STATEMENT, which sets innodb_lock_wait_timeout for that statement
	// alone, and without it, once the server has refused it
	// (noSetStatement).
	claimSQL       [2]string
	noSetStatement atomic.Bool
}

var (
	my    = sqldialect.Of(sqldialect.MySQL)
	myNow = my.Now()
)

// myKeys is the condition that matches n rows by cols, one placeholder per
// column and row. MariaDB plans a row constructor IN with a single row as a
// full index scan, so one row is matched by equalities.
func myKeys(n int, cols ...string) string {
	if n == 1 {
		return strings.Join(cols, " = ? AND ") + " = ?"
	}
	return "(" + strings.Join(cols, ", ") + ") IN (" + list("("+list("?", len(cols))+")", n) + ")"
}

func newMySQL(table string, lockTimeout time.Duration) *mysql {
	t := my.Quote(table)
	m := &mysql{
		table: t,
		ddl: []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	namespace   VARBINARY(64)  NOT NULL,
	grp         VARBINARY(255) NOT NULL,
	k           VARBINARY(255) NOT NULL,
	state       ENUM('processing', 'done') NOT NULL,
	token       VARBINARY(32)  NOT NULL,
	fingerprint VARBINARY(128) NOT NULL,
	expires_at  DATETIME(6)    NOT NULL,
	created_at  DATETIME(6)    NOT NULL,
	updated_at  DATETIME(6)    NOT NULL,
	PRIMARY KEY (namespace, grp, k),
	KEY ` + my.Quote(table+"_expires_at") + ` (expires_at)
) ENGINE = InnoDB`},
	}
	// Whole seconds, rounded up: the variable's unit.
	lockWait := fmt.Sprintf("SET STATEMENT innodb_lock_wait_timeout = %d FOR ", int64((lockTimeout+time.Second-1)/time.Second))
	m.claimSQL = [2]string{m.writeSQL(1, stateDone, lockWait), m.writeSQL(1, stateDone, "")}
	return m
}

func (m *mysql) schema() []string { return m.ddl }

// upsert takes one statement when every key was acquired, which it learns
// from the statement's answer: MySQL has no RETURNING, but the
// LAST_INSERT_ID(expr) of the row that kept a live record reaches the
// client as the statement's insert id, and the table has no AUTO_INCREMENT
// column to set it otherwise. A second statement reads the records of a
// batch in which some key was not acquired.
//
// Outside a transaction a record kept by the first statement may be deleted
// (released, or cleaned up) before the second reads it. Those keys are
// asked again in a transaction, whose insert holds their rows locked until
// its read, so the claim reaches an answer however fast other clients
// change the records; asking again without one might meet the same fate
// each time.
//
// ON DUPLICATE KEY UPDATE assigns left to right, each assignment seeing the
// ones before it: token is decided first, against the old row, and the other
// columns follow it.
func (m *mysql) upsert(ctx context.Context, r runner, rows []upsertRow) (map[dedupe.Ref]record, error) {
	return m.write(ctx, r, m.writeSQL(len(rows), stateProcessing, ""), rows)
}

// claimTx is upsert of a done record under MariaDB's SET STATEMENT, which
// bounds the claim's lock wait. A server that does not know it (MySQL)
// answers error 1064, a syntax error, which leaves the transaction as it
// was: the claim is sent again without it, and so is every later one.
func (m *mysql) claimTx(ctx context.Context, r runner, row upsertRow) (record, error) {
	rows := []upsertRow{row}
	q := m.claimTxSQL()
	recs, err := m.write(ctx, r, q, rows)
	if err != nil && q == m.claimSQL[0] && sqldialect.MySQLError(err, 1064) {
		m.noSetStatement.Store(true)
		recs, err = m.write(ctx, r, m.claimTxSQL(), rows)
	}
	if err != nil {
		return record{}, err
	}
	rec, ok := recs[row.ref]
	if !ok {
		return record{}, fmt.Errorf("the database answered no record for %q", row.ref)
	}
	return rec, nil
}

func (m *mysql) claimTxSQL() string {
	if m.noSetStatement.Load() {
		return m.claimSQL[1]
	}
	return m.claimSQL[0]
}

// writeSQL is the statement of write for n rows.
func (m *mysql) writeSQL(n int, state, prefix string) string {
	return prefix + `INSERT INTO ` + m.table + ` (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES ` + list("(?, ?, ?, '"+state+"', ?, ?, "+my.After("?")+", "+myNow+", "+myNow+")", n) + `
ON DUPLICATE KEY UPDATE
	token = IF(expires_at > ` + myNow + `, IF(LAST_INSERT_ID(1), token, token), VALUES(token)),
	state = IF(token = VALUES(token), VALUES(state), state),
	fingerprint = IF(token = VALUES(token), VALUES(fingerprint), fingerprint),
	created_at = IF(token = VALUES(token), VALUES(created_at), created_at),
	updated_at = IF(token = VALUES(token), VALUES(updated_at), updated_at),
	expires_at = IF(token = VALUES(token), VALUES(expires_at), expires_at)`
}

// write is upsert with q, writeSQL's statement for rows.
func (m *mysql) write(ctx context.Context, r runner, q string, rows []upsertRow) (map[dedupe.Ref]record, error) {
	args := make([]any, 0, 6*len(rows))
	refs := make([]dedupe.Ref, len(rows))
	for i, row := range rows {
		args = append(args, row.ref.Namespace, row.ref.Group, row.ref.Key, row.token, row.fp, sqldialect.Micros(row.lease))
		refs[i] = row.ref
	}
	res, err := r.exec(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return nil, err
	}
	// Rows affected count 1 per insert, 2 per takeover and 0 per kept
	// record (1 with the DSN's clientFoundRows): fewer than the rows means a
	// record was kept even if the server failed to report the id.
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	if id == 0 && n >= int64(len(rows)) {
		recs := make(map[dedupe.Ref]record, len(rows))
		for _, row := range rows {
			recs[row.ref] = record{token: row.token}
		}
		return recs, nil
	}
	recs, err := m.lookup(ctx, r, refs)
	if err != nil || r.tx != nil || len(recs) == len(rows) {
		return recs, err
	}
	var gone []upsertRow
	for _, row := range rows {
		if _, ok := recs[row.ref]; !ok {
			gone = append(gone, row)
		}
	}
	// Only a claim outside a transaction, upsert's, gets here.
	err = r.inTx(ctx, func(r runner) error {
		again, err := m.upsert(ctx, r, gone)
		maps.Copy(recs, again)
		return err
	})
	return recs, err
}

// lookup reads the records of refs. It locks them, to read their latest
// versions inside a REPEATABLE READ transaction too.
func (m *mysql) lookup(ctx context.Context, r runner, refs []dedupe.Ref) (map[dedupe.Ref]record, error) {
	args := make([]any, 0, 3*len(refs))
	for _, ref := range refs {
		args = append(args, ref.Namespace, ref.Group, ref.Key)
	}
	rows, err := r.query(ctx, `SELECT namespace, grp, k, state, token, fingerprint, `+my.UnixMicros("expires_at")+`, `+my.UnixMicros(myNow)+`
FROM `+m.table+` WHERE `+myKeys(len(refs), "namespace", "grp", "k")+` FOR UPDATE`, args...)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// complete counts the rows its UPDATE changed: all or none answer at once,
// and a partial batch reads its records to tell which.
func (m *mysql) complete(ctx context.Context, r runner, ts []dedupe.Ticket, retention time.Duration) (map[dedupe.Ref]bool, error) {
	res, err := r.exec(ctx, `UPDATE `+m.table+` SET state = 'done', expires_at = `+my.After("?")+`, updated_at = `+myNow+`
WHERE `+myKeys(len(ts), "namespace", "grp", "k", "token")+` AND expires_at > `+myNow,
		ticketArgs(ts, []any{sqldialect.Micros(retention)})...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	done := make(map[dedupe.Ref]bool, len(ts))
	if n == int64(len(ts)) || n == 0 {
		for _, t := range ts {
			done[t.Ref] = n > 0
		}
		return done, nil
	}
	refs := make([]dedupe.Ref, len(ts))
	for i, t := range ts {
		refs[i] = t.Ref
	}
	recs, err := m.lookup(ctx, r, refs)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		rec, ok := recs[t.Ref]
		done[t.Ref] = ok && rec.token == t.Token && rec.state == stateDone && rec.expires > rec.now
	}
	return done, nil
}

// release of one key counts the row its DELETE removed. A DELETE's count
// cannot say which of several keys it removed, so a batch locks the owned
// records in a transaction first and then deletes those.
func (m *mysql) release(ctx context.Context, r runner, ts []dedupe.Ticket) (map[dedupe.Ref]bool, error) {
	owned := func(n int) string {
		return myKeys(n, "namespace", "grp", "k", "token") + ` AND state = 'processing' AND expires_at > ` + myNow
	}
	if len(ts) == 1 {
		ok, err := affected(r.exec(ctx, `DELETE FROM `+m.table+` WHERE `+owned(1), ticketArgs(ts, nil)...))
		return map[dedupe.Ref]bool{ts[0].Ref: ok}, err
	}
	var refs map[dedupe.Ref]bool
	err := r.inTx(ctx, func(r runner) error {
		rows, err := r.query(ctx, `SELECT namespace, grp, k FROM `+m.table+` WHERE `+owned(len(ts))+` FOR UPDATE`, ticketArgs(ts, nil)...)
		if err != nil {
			return err
		}
		if refs, err = scanRefs(rows); err != nil || len(refs) == 0 {
			return err
		}
		var mine []dedupe.Ticket
		for _, t := range ts {
			if refs[t.Ref] {
				mine = append(mine, t)
			}
		}
		_, err = r.exec(ctx, `DELETE FROM `+m.table+` WHERE `+myKeys(len(mine), "namespace", "grp", "k", "token"), ticketArgs(mine, nil)...)
		return err
	})
	return refs, err
}

func (m *mysql) extend(ctx context.Context, r runner, t dedupe.Ticket, lease time.Duration) (bool, error) {
	return affected(r.exec(ctx, `UPDATE `+m.table+` SET expires_at = `+my.After("?")+`, updated_at = `+myNow+`
WHERE `+myKeys(1, "namespace", "grp", "k", "token")+` AND state = 'processing' AND expires_at > `+myNow,
		ticketArgs([]dedupe.Ticket{t}, []any{sqldialect.Micros(lease)})...))
}

func (m *mysql) cleanup(ctx context.Context, r runner, limit int) (int64, error) {
	res, err := r.exec(ctx, `DELETE FROM `+m.table+` WHERE expires_at <= `+myNow+` LIMIT ?`, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
