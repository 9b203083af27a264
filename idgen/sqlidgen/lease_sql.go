package sqlidgen

import (
	"strconv"

	"github.com/idemq/idemq/internal/sqldialect"
)

// leaseSQL holds a Leaser's statements for one dialect and table. Their
// parameters are listed beside each; a parameter used twice is passed twice.
type leaseSQL struct {
	ddl []string

	// fill inserts a row for every node id below the pool's size that has
	// none: a never-used node, with an empty token, an empty owner and
	// every time at the earliest the column holds, so that it sorts ahead
	// of every node that was ever leased. A row another client inserted
	// first is left as it is. Parameters: pool, size, pool (PostgreSQL and
	// SQLite); pool, size, size, size, size (MySQL).
	fill string
	// probe reads, without a lock, whether any node of the pool is free
	// and how many of its node ids have a row: what a Leaser's first
	// dynamic Acquire reads, and any Acquire whose take found no node.
	// Parameters: pool, size, pool, size.
	probe string
	// take gives the free node that has been free longest to token and
	// returns its node and high-water mark (PostgreSQL and SQLite; one
	// statement). Parameters: token, owner, lease µs, pool, pool, size.
	take string
	// pick and grant take the free node that has been free longest
	// (MySQL): pick reads it without a lock, with its high-water mark and
	// token, and grant gives it to the new token if its token is still the
	// one pick read. Parameters of pick: pool, size; of grant: token,
	// owner, lease µs, pool, node, old token.
	pick, grant string
	// static takes one node if it is free or was never used.
	// PostgreSQL and SQLite return its high-water mark when it was taken;
	// MySQL returns nothing (took reads the outcome). Parameters: pool,
	// node, token, owner, lease µs.
	static string
	// took reads whether token was granted node, its lease live or not,
	// and the node's mark: the outcome of MySQL's static. A lease that
	// ended before this read (the caller stalled for a lease between the
	// two statements) was still granted to token, not held by another.
	// Parameters: token, pool, node.
	took string
	// owned reads whether token holds node's live lease and its mark.
	// Parameters: token, pool, node.
	owned string
	// renew extends a live lease and raises its node's mark, returning the
	// mark (MySQL returns nothing; owned reads the outcome). Parameters:
	// lease µs, mark µs, pool, node, token.
	renew string
	// release ends a live lease at once, sets its node's mark, never below
	// the mark the lease was granted with, and gives it the pool's next
	// free_seq. Parameters: mark µs, pool, pool, node, token (PostgreSQL
	// and SQLite); mark µs, free_seq, pool, node, token (MySQL, whose
	// nextSeq reads the free_seq first).
	release string
	// nextSeq reads the free_seq a release in the pool gives next (MySQL).
	// Parameter: pool.
	nextSeq string
	// hasSeq reads whether the table has the free_seq column, and addSeq
	// adds it: tables made before it existed gain it on Migrate.
	// Parameter of hasSeq: the table's name.
	hasSeq, addSeq string
	// byToken finds the live lease token holds. Parameters: pool, token.
	byToken string
	// list reads the pool's rows of nodes that were ever leased, and the
	// database's now. Parameter: pool.
	list string
}

func newLeaseSQL(d sqldialect.Dialect, table string) leaseSQL {
	c := sqldialect.Of(d)
	t := c.Quote(table)
	free := c.Quote(table + "_free")
	var q leaseSQL
	switch d {
	case sqldialect.MySQL:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	pool       VARBINARY(64)  NOT NULL,
	node       BIGINT         NOT NULL,
	token      VARBINARY(32)  NOT NULL,
	owner      VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,
	granted_at DATETIME(6)    NOT NULL,
	expires_at DATETIME(6)    NOT NULL,
	freed_at   DATETIME(6)    NULL,
	high_water BIGINT         NOT NULL,
	granted_high_water BIGINT NOT NULL,
	free_seq   BIGINT         NOT NULL DEFAULT 0,
	PRIMARY KEY (pool, node),
	KEY ` + free + ` (pool, expires_at, free_seq, node)
) ENGINE = InnoDB`}
	case sqldialect.Postgres:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	pool       text COLLATE "C" NOT NULL CHECK (octet_length(pool) BETWEEN 1 AND 64),
	node       bigint NOT NULL CHECK (node >= 0),
	token      text NOT NULL,
	owner      text NOT NULL,
	granted_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	freed_at   timestamptz,
	high_water bigint NOT NULL,
	granted_high_water bigint NOT NULL,
	free_seq   bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (pool, node)
)`,
			`CREATE INDEX IF NOT EXISTS ` + free + ` ON ` + t + ` (pool, expires_at, free_seq, node)`,
		}
	default:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	pool       TEXT    NOT NULL,
	node       INTEGER NOT NULL,
	token      TEXT    NOT NULL,
	owner      TEXT    NOT NULL,
	granted_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	freed_at   INTEGER,
	high_water INTEGER NOT NULL,
	granted_high_water INTEGER NOT NULL,
	free_seq   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (pool, node)
) WITHOUT ROWID`,
			`CREATE INDEX IF NOT EXISTS ` + free + ` ON ` + t + ` (pool, expires_at, free_seq, node)`,
		}
	}

	cols := `(pool, node, token, owner, granted_at, expires_at, freed_at, high_water, granted_high_water)`
	vals := `VALUES (?, ?, ?, ?, ` + c.Now() + `, ` + c.After("?") + `, NULL, 0, 0)`

	// A never-used node's row: no token, no owner, never granted, and
	// free since the earliest time there is, so that the order of free
	// nodes below puts every never-used node first, by node id.
	unused := `'', '', ` + c.Never() + `, ` + c.Never() + `, NULL, 0, 0`
	switch d {
	case sqldialect.MySQL:
		// The node ids 0 to 65535 (MaxSize) are the four hex digits of
		// n, each digit's table cut to what size needs. In node order,
		// so that two clients filling at once lock the rows they
		// insert, and the duplicates they skip, in one order.
		hex := `(SELECT 0 AS d`
		for i := 1; i < 16; i++ {
			hex += ` UNION ALL SELECT ` + strconv.Itoa(i)
		}
		hex += `)`
		// INSERT IGNORE skips duplicate keys; the values cannot fail
		// otherwise.
		q.fill = `INSERT IGNORE INTO ` + t + ` ` + cols + `
SELECT ?, n, ` + unused + ` FROM (
	SELECT d0.d + 16 * d1.d + 256 * d2.d + 4096 * d3.d AS n
	FROM ` + hex + ` d0, ` + hex + ` d1, ` + hex + ` d2, ` + hex + ` d3
	WHERE 16 * d1.d < ? AND 256 * d2.d < ? AND 4096 * d3.d < ?
) s WHERE n < ? ORDER BY n`
	case sqldialect.Postgres:
		// In node order, so that two clients filling at once wait for
		// each other's rows in one order.
		q.fill = `INSERT INTO ` + t + ` ` + cols + `
SELECT ?::text, s.n, ` + unused + ` FROM generate_series(0, ?::bigint - 1) AS s(n)
WHERE NOT EXISTS (SELECT 1 FROM ` + t + ` w WHERE w.pool = ? AND w.node = s.n) ORDER BY s.n
ON CONFLICT (pool, node) DO NOTHING`
	default:
		// SQLite runs one writer at a time: the order does not matter.
		q.fill = `INSERT INTO ` + t + ` ` + cols + `
SELECT ?, s.n, ` + unused + ` FROM (
	WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n + 1 < ?)
	SELECT n FROM seq
) s
WHERE NOT EXISTS (SELECT 1 FROM ` + t + ` w WHERE w.pool = ? AND w.node = s.n)
ON CONFLICT (pool, node) DO NOTHING`
	}

	// On MySQL every statement that writes a row reaches it through the
	// primary key and locks that one row, then moves the row's entry
	// within the index on (pool, expires_at, node), on which no statement
	// takes a lock: a write that scanned that index would lock its entries,
	// and the gaps between them, before the row, the opposite order, and
	// could deadlock with the others. The fill, the one statement that
	// locks many rows, locks them in node order.
	byKey := t
	if d == sqldialect.MySQL {
		byKey += ` FORCE INDEX (PRIMARY)`
	}

	// A free node is one whose lease has ended: expires_at is when it ended
	// or was released, so the order of expires_at is the order in which
	// nodes became free, after the never-used nodes. Releases within one
	// tick of the database's clock (SQLite's counts milliseconds) tie on
	// expires_at; free_seq, which grows with every release in the pool,
	// keeps them in release order.
	freeRows := `pool = ? AND node < ? AND expires_at <= ` + c.Now()
	freeOrder := `expires_at, free_seq, node`
	grantSet := `token = ?, owner = ?, granted_at = ` + c.Now() + `, expires_at = ` + c.After("?") + `, freed_at = NULL, granted_high_water = high_water`
	switch d {
	case sqldialect.MySQL:
		// MySQL's UPDATE cannot skip locked rows, and one that picked
		// its row through the index on (pool, expires_at, node) would
		// lock entries of that index before the row. So pick reads the
		// node without a lock, and grant takes it through the primary
		// key if no other client has taken it since: a node's token
		// changes with every grant, and a free node's row with nothing
		// else.
		q.pick = `SELECT node, high_water, token FROM ` + t + ` FORCE INDEX (` + free + `)
WHERE ` + freeRows + ` ORDER BY ` + freeOrder + ` LIMIT 1`
		q.grant = `UPDATE ` + byKey + ` SET ` + grantSet + `
WHERE pool = ? AND node = ? AND token = ? AND expires_at <= ` + c.Now()
	case sqldialect.Postgres:
		// The subquery locks the row it picks and skips rows others hold
		// locked; a row changed since the statement began is checked
		// again before it is locked.
		q.take = `UPDATE ` + t + ` AS w SET ` + grantSet + `
WHERE w.pool = ? AND w.node = (SELECT f.node FROM ` + t + ` f WHERE f.` + freeRows + `
	ORDER BY f.expires_at, f.free_seq, f.node LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING w.node, w.high_water`
	default:
		// One statement holds SQLite's write lock from its start.
		q.take = `UPDATE ` + t + ` SET ` + grantSet + `
WHERE pool = ? AND node = (SELECT f.node FROM ` + t + ` f WHERE f.` + freeRows + `
	ORDER BY f.expires_at, f.free_seq, f.node LIMIT 1)
RETURNING node, high_water`
	}
	q.probe = `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE ` + freeRows + `),
	(SELECT COUNT(*) FROM ` + t + ` WHERE pool = ? AND node < ?)`

	switch d {
	case sqldialect.MySQL:
		// ON DUPLICATE KEY UPDATE assigns left to right, each assignment
		// seeing the ones before it: token is decided first, against the
		// old row, and the other columns follow it.
		q.static = `INSERT INTO ` + t + ` ` + cols + `
` + vals + `
ON DUPLICATE KEY UPDATE
	token = IF(expires_at <= ` + c.Now() + `, VALUES(token), token),
	owner = IF(token = VALUES(token), VALUES(owner), owner),
	granted_at = IF(token = VALUES(token), VALUES(granted_at), granted_at),
	expires_at = IF(token = VALUES(token), VALUES(expires_at), expires_at),
	freed_at = IF(token = VALUES(token), NULL, freed_at),
	granted_high_water = IF(token = VALUES(token), high_water, granted_high_water)`
	case sqldialect.Postgres:
		q.static = `INSERT INTO ` + t + ` AS w ` + cols + `
` + vals + `
ON CONFLICT (pool, node) DO UPDATE SET token = excluded.token, owner = excluded.owner,
	granted_at = excluded.granted_at, expires_at = excluded.expires_at, freed_at = NULL,
	granted_high_water = w.high_water
WHERE w.expires_at <= ` + c.Now() + `
RETURNING w.high_water`
	default:
		q.static = `INSERT INTO ` + t + ` ` + cols + `
` + vals + `
ON CONFLICT (pool, node) DO UPDATE SET token = excluded.token, owner = excluded.owner,
	granted_at = excluded.granted_at, expires_at = excluded.expires_at, freed_at = NULL,
	granted_high_water = high_water
WHERE expires_at <= ` + c.Now() + `
RETURNING high_water`
	}
	q.owned = `SELECT token = ? AND expires_at > ` + c.Now() + `, high_water FROM ` + t + ` WHERE pool = ? AND node = ?`
	q.took = `SELECT token = ?, high_water FROM ` + t + ` WHERE pool = ? AND node = ?`

	raised := c.Greatest("high_water", "?")
	if d == sqldialect.MySQL {
		// MySQL returns no rows from an UPDATE: LAST_INSERT_ID(expr)
		// hands the new mark back as the statement's insert id.
		raised = `LAST_INSERT_ID(` + raised + `)`
	}
	q.renew = `UPDATE ` + byKey + ` SET expires_at = ` + c.After("?") + `, high_water = ` + raised + `
WHERE pool = ? AND node = ? AND token = ? AND expires_at > ` + c.Now()
	if d != sqldialect.MySQL {
		q.renew += `
RETURNING high_water`
	}
	// Release sets the holder's exact mark, which may lie below what its
	// renewals reserved, but never below the mark it was granted with.
	// On MySQL a read of the pool's rows inside the UPDATE would be a
	// locking read of all of them, so nextSeq reads the last free_seq
	// first, without a lock: a release that follows another sees its
	// free_seq; two at once may share one, and then go by node id.
	nextSeq := `(SELECT COALESCE(MAX(f.free_seq), 0) + 1 FROM ` + t + ` f WHERE f.pool = ?)`
	if d == sqldialect.MySQL {
		q.nextSeq = `SELECT COALESCE(MAX(free_seq), 0) + 1 FROM ` + t + ` WHERE pool = ?`
		nextSeq = `?`
	}
	q.release = `UPDATE ` + byKey + ` SET expires_at = ` + c.Now() + `, freed_at = ` + c.Now() + `, high_water = ` + c.Greatest("granted_high_water", "?") + `,
	free_seq = ` + nextSeq + `
WHERE pool = ? AND node = ? AND token = ? AND expires_at > ` + c.Now()
	q.byToken = `SELECT node, high_water FROM ` + t + ` WHERE pool = ? AND token = ? AND expires_at > ` + c.Now()
	q.list = `SELECT node, owner, ` + c.UnixMicros("granted_at") + `, ` + c.UnixMicros("expires_at") + `, ` +
		c.UnixMicros("freed_at") + `, high_water, ` + c.UnixMicros(c.Now()) + `
FROM ` + t + ` WHERE pool = ? AND token <> '' ORDER BY node`

	switch d {
	case sqldialect.MySQL:
		q.hasSeq = `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'free_seq'`
		q.addSeq = `ALTER TABLE ` + t + ` ADD COLUMN free_seq BIGINT NOT NULL DEFAULT 0`
	case sqldialect.Postgres:
		q.hasSeq = `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? AND column_name = 'free_seq'`
		q.addSeq = `ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS free_seq bigint NOT NULL DEFAULT 0`
	default:
		q.hasSeq = `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = 'free_seq'`
		q.addSeq = `ALTER TABLE ` + t + ` ADD COLUMN free_seq INTEGER NOT NULL DEFAULT 0`
	}

	for _, s := range []*string{&q.fill, &q.probe, &q.take, &q.pick, &q.grant, &q.static, &q.took, &q.owned, &q.renew, &q.release, &q.nextSeq, &q.byToken, &q.list, &q.hasSeq} {
		*s = c.Rebind(*s)
	}
	return q
}
