package sqlidgen

// leaseSQL holds a Leaser's statements for one dialect and table. Their
// parameters are listed beside each; a parameter used twice is passed twice.
type leaseSQL struct {
	ddl []string

	// probe finds the smallest node id below the pool's size that no row
	// holds yet, a never-used node (NULL when every node has been used),
	// and whether any row's lease has ended: whether Acquire has anything
	// to take, before it takes a lock. Parameters: pool, pool, size, pool,
	// size.
	probe string
	// insert takes a never-used node, or does nothing when another client
	// took it first (MySQL and PostgreSQL). Parameters: pool, node, token,
	// owner, lease µs.
	insert string
	// insertGap takes the smallest never-used node and returns it, or
	// returns nothing when there is none (SQLite: one statement under the
	// write lock, so no other client can take the node in between).
	// Parameters: pool, token, owner, lease µs, pool, pool, size.
	insertGap string
	// take gives the free node that has been free longest to token and
	// returns its node and high-water mark (PostgreSQL and SQLite; one
	// statement). Parameters: token, owner, lease µs, pool, pool, size.
	take string
	// pick and grant take the free node that has been free longest in a
	// transaction (MySQL): pick locks it, skipping rows others have
	// locked, and returns its node and high-water mark. Parameters of pick:
	// pool, size; of grant: token, owner, lease µs, pool, node.
	pick, grant string
	// static takes one node if it is free or was never used.
	// PostgreSQL and SQLite return its high-water mark when it was taken;
	// MySQL returns nothing (owned reads the outcome). Parameters: pool,
	// node, token, owner, lease µs.
	static string
	// owned reads whether token holds node's live lease and its mark.
	// Parameters: token, pool, node.
	owned string
	// renew extends a live lease and raises its node's mark, returning the
	// mark (MySQL returns nothing; owned reads the outcome). Parameters:
	// lease µs, mark µs, pool, node, token.
	renew string
	// release ends a live lease at once and sets its node's mark, never
	// below the mark the lease was granted with. Parameters: mark µs, pool,
	// node, token.
	release string
	// byToken finds the live lease token holds. Parameters: pool, token.
	byToken string
	// list reads the pool's rows and the database's now. Parameter: pool.
	list string
}

func newLeaseSQL(d Dialect, table string) leaseSQL {
	c := clockOf(d)
	t := quote(d, table)
	free := quote(d, table+"_free")
	var q leaseSQL
	switch d {
	case MySQL:
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
	PRIMARY KEY (pool, node),
	KEY ` + free + ` (pool, expires_at, node)
) ENGINE = InnoDB`}
	case Postgres:
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
	PRIMARY KEY (pool, node)
)`,
			`CREATE INDEX IF NOT EXISTS ` + free + ` ON ` + t + ` (pool, expires_at, node)`,
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
	PRIMARY KEY (pool, node)
) WITHOUT ROWID`,
			`CREATE INDEX IF NOT EXISTS ` + free + ` ON ` + t + ` (pool, expires_at, node)`,
		}
	}

	dual := ""
	if d == MySQL {
		dual = " FROM DUAL"
	}
	// gap is the smallest node id below the pool's size without a row,
	// NULL when there is none. Parameters: pool, pool, size.
	gap := `SELECT MIN(n) AS n FROM (
		SELECT 0 AS n` + dual + ` WHERE NOT EXISTS (SELECT 1 FROM ` + t + ` WHERE pool = ? AND node = 0)
		UNION ALL
		SELECT a.node + 1 FROM ` + t + ` a WHERE a.pool = ? AND a.node + 1 < ?
			AND NOT EXISTS (SELECT 1 FROM ` + t + ` b WHERE b.pool = a.pool AND b.node = a.node + 1)
	) g`

	cols := `(pool, node, token, owner, granted_at, expires_at, freed_at, high_water, granted_high_water)`
	vals := `VALUES (?, ?, ?, ?, ` + c.now + `, ` + c.after + `, NULL, 0, 0)`
	if d == SQLite {
		q.insertGap = `INSERT INTO ` + t + ` ` + cols + `
SELECT ?, n, ?, ?, ` + c.now + `, ` + c.after + `, NULL, 0, 0 FROM (` + gap + `) WHERE n IS NOT NULL
RETURNING node`
	}
	if d == MySQL {
		// INSERT IGNORE answers 0 rows for a duplicate key whatever the
		// DSN's clientFoundRows says; the values cannot fail otherwise.
		q.insert = `INSERT IGNORE INTO ` + t + ` ` + cols + `
` + vals
	} else {
		q.insert = `INSERT INTO ` + t + ` ` + cols + `
` + vals + `
ON CONFLICT (pool, node) DO NOTHING`
	}

	// A free node is one whose lease has ended: expires_at is when it ended
	// or was released, so the order of expires_at is the order in which
	// nodes became free.
	freeRows := `pool = ? AND node < ? AND expires_at <= ` + c.now
	grantSet := `token = ?, owner = ?, granted_at = ` + c.now + `, expires_at = ` + c.after + `, freed_at = NULL, granted_high_water = high_water`
	switch d {
	case MySQL:
		q.pick = `SELECT node, high_water FROM ` + t + ` WHERE ` + freeRows + `
ORDER BY expires_at, node LIMIT 1 FOR UPDATE SKIP LOCKED`
		q.grant = `UPDATE ` + t + ` FORCE INDEX (PRIMARY) SET ` + grantSet + ` WHERE pool = ? AND node = ?`
	case Postgres:
		// The subquery locks the row it picks and skips rows others hold
		// locked; a row changed since the statement began is checked
		// again before it is locked.
		q.take = `UPDATE ` + t + ` AS w SET ` + grantSet + `
WHERE w.pool = ? AND w.node = (SELECT f.node FROM ` + t + ` f WHERE f.` + freeRows + `
	ORDER BY f.expires_at, f.node LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING w.node, w.high_water`
	default:
		// One statement holds SQLite's write lock from its start.
		q.take = `UPDATE ` + t + ` SET ` + grantSet + `
WHERE pool = ? AND node = (SELECT f.node FROM ` + t + ` f WHERE f.` + freeRows + `
	ORDER BY f.expires_at, f.node LIMIT 1)
RETURNING node, high_water`
	}
	q.probe = `SELECT (` + gap + `), EXISTS (SELECT 1 FROM ` + t + ` WHERE ` + freeRows + `)`

	switch d {
	case MySQL:
		// ON DUPLICATE KEY UPDATE assigns left to right, each assignment
		// seeing the ones before it: token is decided first, against the
		// old row, and the other columns follow it.
		q.static = `INSERT INTO ` + t + ` ` + cols + `
` + vals + `
ON DUPLICATE KEY UPDATE
	token = IF(expires_at <= ` + c.now + `, VALUES(token), token),
	owner = IF(token = VALUES(token), VALUES(owner), owner),
	granted_at = IF(token = VALUES(token), VALUES(granted_at), granted_at),
	expires_at = IF(token = VALUES(token), VALUES(expires_at), expires_at),
	freed_at = IF(token = VALUES(token), NULL, freed_at),
	granted_high_water = IF(token = VALUES(token), high_water, granted_high_water)`
	case Postgres:
		q.static = `INSERT INTO ` + t + ` AS w ` + cols + `
` + vals + `
ON CONFLICT (pool, node) DO UPDATE SET token = excluded.token, owner = excluded.owner,
	granted_at = excluded.granted_at, expires_at = excluded.expires_at, freed_at = NULL,
	granted_high_water = w.high_water
WHERE w.expires_at <= ` + c.now + `
RETURNING w.high_water`
	default:
		q.static = `INSERT INTO ` + t + ` ` + cols + `
` + vals + `
ON CONFLICT (pool, node) DO UPDATE SET token = excluded.token, owner = excluded.owner,
	granted_at = excluded.granted_at, expires_at = excluded.expires_at, freed_at = NULL,
	granted_high_water = high_water
WHERE expires_at <= ` + c.now + `
RETURNING high_water`
	}
	q.owned = `SELECT token = ? AND expires_at > ` + c.now + `, high_water FROM ` + t + ` WHERE pool = ? AND node = ?`

	// MySQL may scan the index on (pool, expires_at) for a renewal or
	// release, locking its entries and the gaps between them in index order
	// before the row's: the opposite order of an acquirer, which locks the
	// row it picked and then moves its entry within that index. The primary
	// key reaches the one row and locks nothing else.
	byKey := t
	if d == MySQL {
		byKey += ` FORCE INDEX (PRIMARY)`
	}
	q.renew = `UPDATE ` + byKey + ` SET expires_at = ` + c.after + `, high_water = ` + c.greatest + `(high_water, ?)
WHERE pool = ? AND node = ? AND token = ? AND expires_at > ` + c.now
	if d != MySQL {
		q.renew += `
RETURNING high_water`
	}
	// Release sets the holder's exact mark, which may lie below what its
	// renewals reserved, but never below the mark it was granted with.
	q.release = `UPDATE ` + byKey + ` SET expires_at = ` + c.now + `, freed_at = ` + c.now + `, high_water = ` + c.greatest + `(granted_high_water, ?)
WHERE pool = ? AND node = ? AND token = ? AND expires_at > ` + c.now
	q.byToken = `SELECT node, high_water FROM ` + t + ` WHERE pool = ? AND token = ? AND expires_at > ` + c.now
	q.list = `SELECT node, owner, ` + c.micros("granted_at") + `, ` + c.micros("expires_at") + `, ` +
		c.micros("freed_at") + `, high_water, ` + c.micros(c.now) + `
FROM ` + t + ` WHERE pool = ? ORDER BY node`

	for _, s := range []*string{&q.probe, &q.insert, &q.insertGap, &q.take, &q.pick, &q.grant, &q.static, &q.owned, &q.renew, &q.release, &q.byToken, &q.list} {
		*s = rebind(d, *s)
	}
	return q
}
