package sqldedupe

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/sqldialect"
)

// postgres speaks PostgreSQL. Batches travel as arrays unnested into rows,
// so every statement has one text whatever the batch size.
type postgres struct {
	ddl                                           []string
	upsertSQL, completeSQL, releaseSQL, extendSQL string
	claimTxQuery, cleanupSQL                      string
}

var pg = sqldialect.Of(sqldialect.Postgres)

func newPostgres(table string, lockTimeout time.Duration) *postgres {
	t := pg.Quote(table)
	now := pg.Now()
	lockMillis := strconv.FormatInt(max(lockTimeout.Milliseconds(), 1), 10)
	return &postgres{
		ddl: []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	namespace   text COLLATE "C" NOT NULL CHECK (octet_length(namespace) <= 64),
	grp         text COLLATE "C" NOT NULL CHECK (octet_length(grp) BETWEEN 1 AND 255),
	k           text COLLATE "C" NOT NULL CHECK (octet_length(k) BETWEEN 1 AND 255),
	state       text NOT NULL CHECK (state IN ('processing', 'done')),
	token       text NOT NULL,
	fingerprint text NOT NULL CHECK (octet_length(fingerprint) <= 128),
	expires_at  timestamptz NOT NULL,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	PRIMARY KEY (namespace, grp, k)
)`,
			`CREATE INDEX IF NOT EXISTS ` + pg.Quote(table+"_expires_at") + ` ON ` + t + ` (expires_at)`,
		},
		// A conflicting row is always updated, to itself while its record
		// is live, so that RETURNING answers for every key, with its latest
		// committed version: a key another transaction inserted while this
		// one waited is answered right, where a DO NOTHING or a WHERE on the
		// update would leave it to a second statement.
		upsertSQL: `INSERT INTO ` + t + ` AS d (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
SELECT r.ns, r.g, r.k, 'processing', r.token, r.fp, ` + pg.After("r.us") + `, ` + now + `, ` + now + `
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[]) AS r (ns, g, k, token, fp, us)
ON CONFLICT (namespace, grp, k) DO UPDATE SET
	` + takeover("d.", now) + `
RETURNING d.namespace, d.grp, d.k, d.state, d.token, d.fingerprint, ` + pg.UnixMicros("d.expires_at") + `, ` + pg.UnixMicros(now),
		// The claim in a caller's transaction, of one key: a done record.
		// Its CTE sets lock_timeout before the row is written, which is
		// when the statement waits for another transaction's claim of the
		// key, and RETURNING, evaluated once the row is written, sets it
		// back, so that the timeout bounds the claim and not the caller's
		// statements after it; a statement that fails ends the transaction
		// anyway. One statement rather than a SET LOCAL before it: a round
		// trip less per message.
		claimTxQuery: `WITH cfg AS (SELECT current_setting('lock_timeout') AS was, set_config('lock_timeout', '` + lockMillis + `', true))
INSERT INTO ` + t + ` AS d (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
SELECT $1::text, $2::text, $3::text, 'done', $4::text, $5::text, ` + pg.After("$6") + `, ` + now + `, ` + now + ` FROM cfg
ON CONFLICT (namespace, grp, k) DO UPDATE SET
	` + takeover("d.", now) + `
RETURNING d.state, d.token, d.fingerprint, ` + pg.UnixMicros("d.expires_at") + `, ` + pg.UnixMicros(now) + `,
	set_config('lock_timeout', (SELECT was FROM cfg), true)`,
		// Complete and Release go through the primary key's arbiter too, as
		// an INSERT whose conflicting row is updated only if the ticket owns
		// it. An UPDATE or DELETE joined to the unnested batch would leave
		// the access path to the planner, and a prepared statement keeps
		// the generic plan it made while the table was small: a hash join
		// over a scan of every record, until the next ANALYZE. A key with
		// no record gets an expired row, which every statement treats as
		// no record and the cleanup deletes; it is told apart from an owned
		// row by its state (done, where a released row stays processing)
		// and its expiry (past, where a completed row's is ahead).
		completeSQL: `INSERT INTO ` + t + ` AS d (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
SELECT r.ns, r.g, r.k, 'done', r.token, '', 'epoch', ` + now + `, ` + now + `
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS r (ns, g, k, token)
ON CONFLICT (namespace, grp, k) DO UPDATE SET
	state = 'done', expires_at = ` + pg.After("$1") + `, updated_at = ` + now + `
WHERE d.token = excluded.token AND d.expires_at > ` + now + `
RETURNING d.namespace, d.grp, d.k, d.expires_at > ` + now,
		// Release leaves the row expired rather than deleting it: the key
		// can be claimed at once, which takes the row over in place.
		releaseSQL: `INSERT INTO ` + t + ` AS d (namespace, grp, k, state, token, fingerprint, expires_at, created_at, updated_at)
SELECT r.ns, r.g, r.k, 'done', r.token, '', 'epoch', ` + now + `, ` + now + `
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r (ns, g, k, token)
ON CONFLICT (namespace, grp, k) DO UPDATE SET expires_at = 'epoch', updated_at = ` + now + `
WHERE d.token = excluded.token AND d.state = 'processing' AND d.expires_at > ` + now + `
RETURNING d.namespace, d.grp, d.k, d.state = 'processing'`,
		// Extend names one key by equality on the whole primary key, which
		// every plan serves from its index.
		extendSQL: `UPDATE ` + t + ` SET expires_at = ` + pg.After("$1") + `, updated_at = ` + now + `
WHERE namespace = $2 AND grp = $3 AND k = $4 AND token = $5 AND state = 'processing' AND expires_at > ` + now,
		// PostgreSQL's DELETE has no LIMIT: the batch is picked by ctid,
		// skipping rows a claim holds locked. FOR UPDATE rechecks a row
		// updated since the scan began, so a record claimed again meanwhile
		// is left alone.
		cleanupSQL: `DELETE FROM ` + t + ` WHERE ctid = ANY (ARRAY (
	SELECT ctid FROM ` + t + ` WHERE expires_at <= ` + now + ` LIMIT $1 FOR UPDATE SKIP LOCKED))`,
	}
}

func (p *postgres) schema() []string { return p.ddl }

// scanOwned reads rows of namespace, grp, k and whether the ticket owned the
// record.
func scanOwned(rows *sql.Rows) (map[dedupe.Ref]bool, error) {
	defer rows.Close()
	owned := map[dedupe.Ref]bool{}
	for rows.Next() {
		var (
			ref dedupe.Ref
			ok  bool
		)
		if err := rows.Scan(&ref.Namespace, &ref.Group, &ref.Key, &ok); err != nil {
			return nil, err
		}
		owned[ref] = ok
	}
	return owned, rows.Err()
}

// pgTickets splits tickets into the arrays the statements unnest.
func pgTickets(ts []dedupe.Ticket) (ns, g, k, token []string) {
	for _, t := range ts {
		ns, g, k, token = append(ns, t.Namespace), append(g, t.Group), append(k, t.Key), append(token, t.Token)
	}
	return ns, g, k, token
}

func (p *postgres) upsert(ctx context.Context, r runner, rows []upsertRow) (map[dedupe.Ref]record, error) {
	var ns, g, k, token, fp []string
	var us []int64
	for _, row := range rows {
		ns, g, k = append(ns, row.ref.Namespace), append(g, row.ref.Group), append(k, row.ref.Key)
		token, fp, us = append(token, row.token), append(fp, row.fp), append(us, sqldialect.Micros(row.lease))
	}
	res, err := r.query(ctx, p.upsertSQL, ns, g, k, token, fp, us)
	if err != nil {
		return nil, err
	}
	return scanRecords(res)
}

func (p *postgres) claimTxSQL() string { return p.claimTxQuery }

func (p *postgres) claimTx(ctx context.Context, r runner, row upsertRow) (record, error) {
	rows, err := r.query(ctx, p.claimTxQuery, row.ref.Namespace, row.ref.Group, row.ref.Key, row.token, row.fp, sqldialect.Micros(row.lease))
	if err != nil {
		return record{}, err
	}
	defer rows.Close()
	var (
		rec      record
		restored string
	)
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return record{}, err
		}
		return record{}, fmt.Errorf("the database answered no record for %q", row.ref)
	}
	if err := rows.Scan(&rec.state, &rec.token, &rec.fp, &rec.expires, &rec.now, &restored); err != nil {
		return record{}, err
	}
	return rec, rows.Close()
}

func (p *postgres) complete(ctx context.Context, r runner, ts []dedupe.Ticket, retention time.Duration) (map[dedupe.Ref]bool, error) {
	ns, g, k, token := pgTickets(ts)
	rows, err := r.query(ctx, p.completeSQL, sqldialect.Micros(retention), ns, g, k, token)
	if err != nil {
		return nil, err
	}
	return scanOwned(rows)
}

func (p *postgres) release(ctx context.Context, r runner, ts []dedupe.Ticket) (map[dedupe.Ref]bool, error) {
	ns, g, k, token := pgTickets(ts)
	rows, err := r.query(ctx, p.releaseSQL, ns, g, k, token)
	if err != nil {
		return nil, err
	}
	return scanOwned(rows)
}

func (p *postgres) extend(ctx context.Context, r runner, t dedupe.Ticket, lease time.Duration) (bool, error) {
	return affected(r.exec(ctx, p.extendSQL, sqldialect.Micros(lease), t.Namespace, t.Group, t.Key, t.Token))
}

func (p *postgres) cleanup(ctx context.Context, r runner, limit int) (int64, error) {
	res, err := r.exec(ctx, p.cleanupSQL, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
