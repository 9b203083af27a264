package sqlidgen

import "github.com/idemq/idemq/internal/sqldialect"

// segmentSQL holds the statements of [Segments] for one dialect and table.
// Their parameters are listed beside each; a parameter used twice is passed
// twice.
type segmentSQL struct {
	ddl []string

	// next raises a tag's max_id by a step, or by its stored step when the
	// step is 0 (PostgreSQL and SQLite only), unless that would pass its
	// maximum — max_limit, or the largest BIGINT when max_limit is 0 — and
	// stamps update_time. PostgreSQL and SQLite return the new max_id, the
	// stored step and max_limit; MySQL returns the new max_id as the
	// statement's insert id (LAST_INSERT_ID(expr)), as it returns no rows
	// from an UPDATE. Parameters: step, tag, step.
	next string
	// read reads a tag's max_id, step and max_limit. Parameter: tag.
	read string
	// tag reads a tag's record; tags reads every tag's. Parameter of tag:
	// tag.
	tag, tags string
	// create inserts a tag. Parameters: tag, max_id, step, max_limit,
	// description.
	create string
	// setMax sets a tag's max_limit unless it is below max_id and not 0.
	// Parameters: max, tag, max, max.
	setMax string
}

// maxBigint is the largest BIGINT: a tag without a maximum ends there, so
// that max_id + step cannot overflow (SQLite would turn it into a REAL).
const maxBigint = "9223372036854775807"

func newSegmentSQL(d sqldialect.Dialect, table string) segmentSQL {
	c := sqldialect.Of(d)
	t := c.Quote(table)
	var q segmentSQL
	switch d {
	case sqldialect.MySQL:
		// utf8mb4_bin compares tags byte for byte, as PostgreSQL's and
		// SQLite's defaults and Redis do.
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	biz_tag     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
	max_id      BIGINT       NOT NULL DEFAULT 1,
	step        INT          NOT NULL,
	max_limit   BIGINT       NOT NULL DEFAULT 0,
	description VARCHAR(256) CHARACTER SET utf8mb4 DEFAULT NULL,
	update_time DATETIME(6)  NOT NULL,
	PRIMARY KEY (biz_tag)
) ENGINE = InnoDB`}
	case sqldialect.Postgres:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	biz_tag     varchar(128) NOT NULL PRIMARY KEY,
	max_id      bigint       NOT NULL DEFAULT 1,
	step        integer      NOT NULL,
	max_limit   bigint       NOT NULL DEFAULT 0,
	description varchar(256),
	update_time timestamptz  NOT NULL
)`}
	default:
		q.ddl = []string{`CREATE TABLE IF NOT EXISTS ` + t + ` (
	biz_tag     TEXT    NOT NULL PRIMARY KEY,
	max_id      INTEGER NOT NULL DEFAULT 1,
	step        INTEGER NOT NULL,
	max_limit   INTEGER NOT NULL DEFAULT 0,
	description TEXT,
	update_time INTEGER NOT NULL
) WITHOUT ROWID`}
	}

	// num is a numeric parameter: PostgreSQL would infer integer from a
	// comparison with 0 and refuse a bigint.
	num := "?"
	if d == sqldialect.Postgres {
		num = "?::bigint"
	}
	limit := `CASE WHEN max_limit = 0 THEN ` + maxBigint + ` ELSE max_limit END`
	if d == sqldialect.MySQL {
		q.next = `UPDATE ` + t + ` SET max_id = LAST_INSERT_ID(max_id + ?), update_time = ` + c.Now() + `
WHERE biz_tag = ? AND max_id <= ` + limit + ` - ?`
	} else {
		inc := `COALESCE(NULLIF(` + num + `, 0), step)`
		q.next = `UPDATE ` + t + ` SET max_id = max_id + ` + inc + `, update_time = ` + c.Now() + `
WHERE biz_tag = ? AND max_id <= ` + limit + ` - ` + inc + `
RETURNING max_id, step, max_limit`
	}
	q.read = `SELECT max_id, step, max_limit FROM ` + t + ` WHERE biz_tag = ?`
	// A Leaf table's description may be NULL.
	cols := `SELECT biz_tag, max_id, step, max_limit, COALESCE(description, ''), ` + c.UnixMicros("update_time") + ` FROM ` + t
	q.tag = cols + ` WHERE biz_tag = ?`
	q.tags = cols
	q.create = `INSERT INTO ` + t + ` (biz_tag, max_id, step, max_limit, description, update_time)
VALUES (?, ?, ?, ?, ?, ` + c.Now() + `)`
	q.setMax = `UPDATE ` + t + ` SET max_limit = ?, update_time = ` + c.Now() + `
WHERE biz_tag = ? AND (` + num + ` = 0 OR max_id <= ` + num + `)`

	for _, s := range []*string{&q.next, &q.read, &q.tag, &q.tags, &q.create, &q.setMax} {
		*s = c.Rebind(*s)
	}
	return q
}
