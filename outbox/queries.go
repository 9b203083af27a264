package outbox

import (
	"strings"
	"time"

	"github.com/idemq/idemq/internal/sqldialect"
)

// Row states, as stored.
const (
	statePending = 0
	stateSent    = 1
	stateParked  = 2
)

// queries are one table's statements in one dialect. Every time they store
// or compare is the database's now (see package sqldialect).
type queries struct {
	d      sqldialect.Dialect
	syn    sqldialect.Syntax
	table  string // quoted
	name   string // as configured, for lock names
	schema []string
}

// columns are what a claim reads of a row, in the order scanRow reads them.
const columns = "id, topic, tags, msg_keys, ordering, props, body, attempts"

func newQueries(d sqldialect.Dialect, table string) queries {
	syn := sqldialect.Of(d)
	q := queries{d: d, syn: syn, table: syn.Quote(table), name: table}
	t, ix := q.table, func(suffix string) string { return syn.Quote(table + suffix) }
	// Only SQLite's claim looks a key's earlier rows up (candidates), by
	// an index on (ordering, state, id); MySQL and PostgreSQL read the
	// pending rows in order instead (choose) and spare every write that
	// index.
	switch d {
	case sqldialect.MySQL:
		// VARBINARY compares byte for byte, as ordering keys must. The
		// owner is fixed-width, as tokens are (32 hex digits), so that a
		// lease rewrites a row in place: a VARBINARY owner growing from ''
		// made InnoDB reorganize pages, at 3 to 7 times the claim's cost.
		q.schema = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id          BIGINT NOT NULL AUTO_INCREMENT,
	topic       VARBINARY(255) NOT NULL,
	tags        VARBINARY(255) NOT NULL,
	msg_keys    BLOB           NOT NULL,
	k           VARBINARY(255) NOT NULL,
	ordering    VARBINARY(255) NOT NULL,
	props       BLOB           NOT NULL,
	body        LONGBLOB       NOT NULL,
	state       TINYINT        NOT NULL,
	attempts    INT            NOT NULL,
	due_at      DATETIME(6)    NOT NULL,
	lease_until DATETIME(6)    NOT NULL,
	owner       CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	last_error  BLOB           NOT NULL,
	created_at  DATETIME(6)    NOT NULL,
	sent_at     DATETIME(6)    NULL,
	PRIMARY KEY (id),
	KEY ` + ix("_state") + ` (state, id),
	KEY ` + ix("_sent") + ` (state, sent_at)
) ENGINE = InnoDB`}
	case sqldialect.Postgres:
		// A fill factor of 50 leaves room in each page for a lease's new
		// row version, which then needs no index entries (a HOT update):
		// the lease's UPDATE costs about 40 % less.
		q.schema = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	topic       text        NOT NULL,
	tags        text        NOT NULL,
	msg_keys    text        NOT NULL,
	k           text        NOT NULL,
	ordering    text        NOT NULL,
	props       text        NOT NULL,
	body        bytea       NOT NULL,
	state       smallint    NOT NULL,
	attempts    integer     NOT NULL,
	due_at      timestamptz NOT NULL,
	lease_until timestamptz NOT NULL,
	owner       text        NOT NULL,
	last_error  text        NOT NULL,
	created_at  timestamptz NOT NULL,
	sent_at     timestamptz
) WITH (fillfactor = 50)`,
			`CREATE INDEX IF NOT EXISTS ` + ix("_state") + ` ON ` + t + ` (state, id)`,
			`CREATE INDEX IF NOT EXISTS ` + ix("_sent") + ` ON ` + t + ` (state, sent_at)`,
		}
	default:
		// AUTOINCREMENT never reuses the id of a deleted row.
		q.schema = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	topic       TEXT    NOT NULL,
	tags        TEXT    NOT NULL,
	msg_keys    TEXT    NOT NULL,
	k           TEXT    NOT NULL,
	ordering    TEXT    NOT NULL,
	props       TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	state       INTEGER NOT NULL,
	attempts    INTEGER NOT NULL,
	due_at      INTEGER NOT NULL,
	lease_until INTEGER NOT NULL,
	owner       TEXT    NOT NULL,
	last_error  TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	sent_at     INTEGER
)`,
			`CREATE INDEX IF NOT EXISTS ` + ix("_state") + ` ON ` + t + ` (state, id)`,
			`CREATE INDEX IF NOT EXISTS ` + ix("_ordering") + ` ON ` + t + ` (ordering, state, id)`,
			`CREATE INDEX IF NOT EXISTS ` + ix("_sent") + ` ON ` + t + ` (state, sent_at)`,
		}
	}
	return q
}

// micros is d in microseconds for a statement: 0 stays 0.
func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return sqldialect.Micros(d)
}

// list returns n copies of item separated by commas.
func list(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ")
}

// insert writes n rows of 8 parameters each: topic, tags, keys, key,
// ordering key, properties, body, delay in µs.
func (q queries) insert(n int) string {
	now := q.syn.Now()
	row := "(?, ?, ?, ?, ?, ?, ?, 0, 0, " + q.syn.After("?") + ", " + q.syn.Never() + ", '', '', " + now + ")"
	return q.syn.Rebind(`INSERT INTO ` + q.table + ` (topic, tags, msg_keys, k, ordering, props, body, state, attempts, due_at, lease_until, owner, last_error, created_at)
VALUES ` + list(row, n))
}

// candidates selects the rows a claim may take, first by id, at most one
// parameter's worth: pending, due and not leased, each with every earlier
// pending row of its ordering key due, not leased and never failed. Those
// earlier rows then come first in the same selection, so a claim takes a
// key's rows in order or not at all, and no relay takes a row while an
// earlier one of its key is leased to another or waits for its backoff. A
// key whose first row has failed before offers that row alone, so that a
// failing key with a long backlog cannot fill every claim while the other
// keys wait.
func (q queries) candidates(cols string) string {
	now := q.syn.Now()
	return `SELECT ` + cols + ` FROM ` + q.table + ` o
WHERE o.state = 0 AND o.due_at <= ` + now + ` AND o.lease_until <= ` + now + `
AND (o.ordering = '' OR NOT EXISTS (SELECT 1 FROM ` + q.table + ` p
	WHERE p.ordering = o.ordering AND p.state = 0 AND p.id < o.id AND (p.due_at > ` + now + ` OR p.lease_until > ` + now + ` OR p.attempts > 0)))
ORDER BY o.id LIMIT ?`
}

// claim (SQLite) leases the candidates to an owner in one
// statement: owner, lease in µs, limit.
func (q queries) claim() string {
	return q.syn.Rebind(`UPDATE ` + q.table + ` SET owner = ?, lease_until = ` + q.syn.After("?") + `
WHERE id IN (` + q.candidates("o.id") + `)
RETURNING ` + columns)
}

// pending (MySQL and PostgreSQL) reads a page of pending rows by id, from
// after an id, without their messages: id, ordering key, attempts, and
// whether the row is due and not leased (1 or 0). Parameters: the id, the
// limit.
func (q queries) pending() string {
	now := q.syn.Now()
	return q.syn.Rebind(`SELECT id, ordering, attempts, CASE WHEN due_at <= ` + now + ` AND lease_until <= ` + now + ` THEN 1 ELSE 0 END
FROM ` + q.table + ` WHERE state = 0 AND id > ? ORDER BY id LIMIT ?`)
}

// spans matches the ids of n spans: parameters lo, hi for each. The
// databases look a span up as one range of the primary key, at a fraction
// of the cost of a list of its ids (on MariaDB, half for an UPDATE of 1,024
// rows and a third for a DELETE).
func spans(n int) string {
	return `(` + strings.TrimSuffix(strings.Repeat("id BETWEEN ? AND ? OR ", n), " OR ") + `)`
}

// bounded ends a statement that changes rows of spans: on MySQL it stops
// at the last row the statement is to change (ORDER BY id LIMIT, the count
// its last parameter; see [queries.changeArgs]), so that InnoDB does not
// read the row after the last span. Under REPEATABLE READ it would lock
// that row, and wait for the business transaction whose uncommitted row it
// is at the table's tail.
func (q queries) bounded(s string) string {
	if q.d == sqldialect.MySQL {
		return s + ` ORDER BY id LIMIT ?`
	}
	return s
}

// changeArgs are the arguments of a [queries.bounded] statement that
// changes at most rows rows of ss: first, the spans, then on MySQL rows.
func (q queries) changeArgs(ss []span, rows int, first ...any) []any {
	args := spanArgs(ss, first...)
	if q.d == sqldialect.MySQL {
		args = append(args, rows)
	}
	return args
}

// claimIDs (MySQL and PostgreSQL) leases the rows of n spans to an owner,
// if still pending and free: owner, lease in µs, then the spans
// (changeArgs).
func (q queries) claimIDs(n int) string {
	now := q.syn.Now()
	return q.syn.Rebind(q.bounded(`UPDATE ` + q.table + ` SET owner = ?, lease_until = ` + q.syn.After("?") + `
WHERE ` + spans(n) + ` AND state = 0 AND lease_until <= ` + now))
}

// owned (MySQL and PostgreSQL) reads the rows of n spans an owner holds,
// as [columns]: owner, then the spans.
func (q queries) owned(n int) string {
	return q.syn.Rebind(`SELECT ` + columns + ` FROM ` + q.table + ` WHERE owner = ? AND ` + spans(n))
}

// sent marks the rows of n spans an owner holds sent: owner, then the
// spans (changeArgs).
func (q queries) sent(n int) string {
	now := q.syn.Now()
	return q.syn.Rebind(q.bounded(`UPDATE ` + q.table + ` SET state = 1, sent_at = ` + now + `, owner = '', lease_until = ` + q.syn.Never() + `
WHERE owner = ? AND ` + spans(n)))
}

// remove deletes the rows of n spans an owner holds: owner, then the
// spans (changeArgs).
func (q queries) remove(n int) string {
	return q.syn.Rebind(q.bounded(`DELETE FROM ` + q.table + ` WHERE owner = ? AND ` + spans(n)))
}

// release hands back the rows of n spans an owner holds, untouched: owner,
// then the spans (changeArgs).
func (q queries) release(n int) string {
	return q.syn.Rebind(q.bounded(`UPDATE ` + q.table + ` SET owner = '', lease_until = ` + q.syn.Never() + `
WHERE owner = ? AND ` + spans(n)))
}

// retry puts a row an owner holds back for a backoff: backoff in µs, the
// error, owner, id.
func (q queries) retry() string {
	return q.syn.Rebind(`UPDATE ` + q.table + ` SET attempts = attempts + 1, due_at = ` + q.syn.After("?") + `, last_error = ?, owner = '', lease_until = ` + q.syn.Never() + `
WHERE owner = ? AND id = ?`)
}

// park parks a row an owner holds: the reason, owner, id.
func (q queries) park() string {
	return q.syn.Rebind(`UPDATE ` + q.table + ` SET state = 2, attempts = attempts + 1, last_error = ?, owner = '', lease_until = ` + q.syn.Never() + `
WHERE owner = ? AND id = ?`)
}

// cleanup deletes at most a limit of rows sent before a time: the
// retention in µs (negative), the limit.
func (q queries) cleanup() string {
	old := `state = 1 AND sent_at <= ` + q.syn.After("?")
	if q.d == sqldialect.MySQL {
		return `DELETE FROM ` + q.table + ` WHERE ` + old + ` LIMIT ?`
	}
	return q.syn.Rebind(`DELETE FROM ` + q.table + ` WHERE id IN (SELECT id FROM ` + q.table + ` WHERE ` + old + ` LIMIT ?)`)
}
