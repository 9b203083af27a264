package sqldedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/sqldialect"
)

// sqlite speaks SQLite. Batches travel as row lists, so a statement's text
// depends on its batch size.
//
// Times are INTEGER µs since the Unix epoch, in whole milliseconds: the
// resolution of SQLite's clock.
type sqlite struct {
	table    string // quoted
	ddl      []string
	claimSQL string // claimTx's
}

var (
	lite    = sqldialect.Of(sqldialect.SQLite)
	liteNow = lite.Now()
)

func newSQLite(table string) *sqlite {
	t := lite.Quote(table)
	l := &sqlite{
		table: t,
		ddl: []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	namespace   TEXT    NOT NULL,
	grp         TEXT    NOT NULL,
	k           TEXT    NOT NULL,
	state       TEXT    NOT NULL,
	token       TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	expires_at  INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (namespace, grp, k)
) WITHOUT ROWID`,
			`CREATE INDEX IF NOT EXISTS ` + lite.Quote(table+"_expires_at") + ` ON ` + t + ` (expires_at)`,
		},
	}
	l.claimSQL = l.writeSQL(1, stateDone)
	return l
}

func (l *sqlite) schema() []string { return l.ddl }

// upsert always updates a conflicting row, to itself while its record is
// live, so that RETURNING answers for every key.
func (l *sqlite) upsert(ctx context.Context, r runner, rows []upsertRow) (map[dedupe.Ref]record, error) {
	return l.write(ctx, r, l.writeSQL(len(rows), stateProcessing), rows)
}

// claimTx is upsert of a done record. SQLite has no lock timeout of its
// own: a transaction waits for the database's write lock as long as the
// connection's busy timeout, at its first write (the claim) or, begun
// IMMEDIATE, at BEGIN.
func (l *sqlite) claimTx(ctx context.Context, r runner, row upsertRow) (record, error) {
	recs, err := l.write(ctx, r, l.claimSQL, []upsertRow{row})
	if err != nil {
		return record{}, err
	}
	rec, ok := recs[row.ref]
	if !ok {
		return record{}, fmt.Errorf("the database answered no record for %q", row.ref)
	}
	return rec, nil
}

func (l *sqlite) claimTxSQL() string { return l.claimSQL }

// writeSQL is the statement of write for n rows.
func (l *sqlite) writeSQL(n int, state string) string {
	return `INSERT INTO ` + l.table + ` (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
VALUES ` + list("(?, ?, ?, '"+state+"', ?, ?, "+lite.After("?")+", "+liteNow+", "+liteNow+")", n) + `
ON CONFLICT (namespace, grp, k) DO UPDATE SET
	` + takeover("", liteNow) + `
RETURNING namespace, grp, k, state, token, fingerprint, expires_at, ` + liteNow
}

// write is upsert with q, writeSQL's statement for rows.
func (l *sqlite) write(ctx context.Context, r runner, q string, rows []upsertRow) (map[dedupe.Ref]record, error) {
	args := make([]any, 0, 6*len(rows))
	for _, row := range rows {
		args = append(args, row.ref.Namespace, row.ref.Group, row.ref.Key, row.token, row.fp, sqldialect.Micros(row.lease))
	}
	res, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanRecords(res)
}

// liteTickets is the condition matching ts's rows by key and token.
func liteTickets(ts []dedupe.Ticket) string {
	return "(namespace, grp, k, token) IN (VALUES " + list("(?, ?, ?, ?)", len(ts)) + ")"
}

func (l *sqlite) complete(ctx context.Context, r runner, ts []dedupe.Ticket, retention time.Duration) (map[dedupe.Ref]bool, error) {
	rows, err := r.query(ctx, `UPDATE `+l.table+` SET state = 'done', expires_at = `+lite.After("?")+`, updated_at = `+liteNow+`
WHERE `+liteTickets(ts)+` AND expires_at > `+liteNow+`
RETURNING namespace, grp, k`, ticketArgs(ts, []any{sqldialect.Micros(retention)})...)
	if err != nil {
		return nil, err
	}
	return scanRefs(rows)
}

func (l *sqlite) release(ctx context.Context, r runner, ts []dedupe.Ticket) (map[dedupe.Ref]bool, error) {
	rows, err := r.query(ctx, `DELETE FROM `+l.table+`
WHERE `+liteTickets(ts)+` AND state = 'processing' AND expires_at > `+liteNow+`
RETURNING namespace, grp, k`, ticketArgs(ts, nil)...)
	if err != nil {
		return nil, err
	}
	return scanRefs(rows)
}

func (l *sqlite) extend(ctx context.Context, r runner, t dedupe.Ticket, lease time.Duration) (bool, error) {
	return affected(r.exec(ctx, `UPDATE `+l.table+` SET expires_at = `+lite.After("?")+`, updated_at = `+liteNow+`
WHERE namespace = ? AND grp = ? AND k = ? AND token = ? AND state = 'processing' AND expires_at > `+liteNow,
		sqldialect.Micros(lease), t.Namespace, t.Group, t.Key, t.Token))
}

// cleanup picks its batch in a subquery: DELETE ... LIMIT needs a compile
// option most builds of SQLite lack.
func (l *sqlite) cleanup(ctx context.Context, r runner, limit int) (int64, error) {
	res, err := r.exec(ctx, `DELETE FROM `+l.table+` WHERE (namespace, grp, k) IN (
	SELECT namespace, grp, k FROM `+l.table+` WHERE expires_at <= `+liteNow+` LIMIT ?)`, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
