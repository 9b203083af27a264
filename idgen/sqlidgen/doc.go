// Package sqlidgen leases worker node ids from an SQL database, for MySQL
// and MariaDB, PostgreSQL and SQLite: [Leaser] keeps a pool of node ids with
// leases that expire, and [WorkerNodes] hands out a new id at every start
// from an auto-increment column, as Baidu's uid-generator does with its
// WORKER_NODE table. Both are [idgen.Leaser]s for [idgen.NewLeased].
// [Segments] is an [idgen.SegmentSource] over Leaf's table of tags, for
// [idgen.NewSegmentAllocator] (see Segments below). The package imports
// only database/sql: a program links the one driver it opens its *sql.DB
// with.
//
//	db, err := sql.Open("pgx", dsn)
//	...
//	leaser, err := sqlidgen.New(db, sqlidgen.Postgres, sqlidgen.Config{Pool: "orders", Size: 1024})
//	...
//	if err := leaser.Migrate(ctx); err != nil { ... }
//	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{})
//
// # Drivers
//
//   - MySQL 5.7 or later and MariaDB 10.5 or later:
//     github.com/go-sql-driver/mysql, with any DSN options (parseTime, loc,
//     time_zone, clientFoundRows and interpolateParams all work;
//     interpolateParams=true saves a round trip per statement, see below).
//   - PostgreSQL 10 or later: pgx's database/sql driver,
//     github.com/jackc/pgx/v5/stdlib, or another.
//   - SQLite 3.35 or later (for RETURNING): modernc.org/sqlite or another
//     driver. Use a file in WAL mode with a busy timeout, so that writers
//     wait for each other instead of failing; the package runs no
//     transactions of its own, and every statement that writes holds the
//     write lock from its start:
//     file:ids.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate
//     A statement that finds the write lock taken sleeps in SQLite's busy
//     handler, up to 100ms a try, so under many writers one call can take
//     hundreds of milliseconds: keep [Config.Lease] well above that (the
//     default is).
//
// # Leased pool
//
// [Leaser] keeps a row per node of a pool ([Config.Pool]): the token of the
// last lease granted, its owner, when it was granted and when it ends, when
// it was released, and the node's high-water mark, now and when the lease
// was granted. The pool is node ids 0 to [Config.Size]-1, at most
// [MaxSize] (65536, Sonyflake's 16 node bits; for a larger id space use
// [WorkerNodes]); one table may hold many pools. A node that was never
// leased has a row too, with an empty token and owner and every time at
// the earliest its column holds. The first dynamic Acquire of each
// [Leaser] inserts the rows its pool lacks — every row of a new pool, the
// new ids of a grown one — in one statement, as does any Acquire that
// finds no free node while rows are missing. [Leaser.List] leaves the rows
// of never-used nodes out.
//
// A lease lasts [Config.Lease] from the database's now when it is granted
// or renewed. Acquire takes the smallest node id that was never used; when
// every id has been, it takes the node whose lease ended longest ago, a
// released lease ending when it was released. So a freed node joins the tail
// of a queue (seed 000's Redis list: take from the head, give back to the
// tail) and rests as long as the pool allows before anyone takes it again.
// Both are one order, that of the index on (pool, expires_at, node): a
// never-used node's lease ended at the earliest time there is, so every
// never-used node comes first, by node id, and a static lease taken above
// never-used ones is passed over while it lasts. Acquire with
// [idgen.LeaseRequest].Static takes exactly the node asked for, if no live
// lease holds it. Acquire refuses with [idgen.ErrNodeRange] a pool whose ids
// the caller's layout cannot hold.
//
// Renew and Release name the lease by node and token, and act only while the
// lease is live by the database's clock; otherwise they fail with
// [idgen.ErrLeaseLost] and change nothing. A released lease has ended: a
// second Release of it fails the same way.
//
// # Round trips
//
// The package runs no transactions: every statement commits on its own.
// Each statement is one round trip to the database, with two provisos from
// the drivers: github.com/go-sql-driver/mysql prepares a statement with
// arguments in a round trip of its own before it runs it, unless the DSN
// sets interpolateParams=true; pgx prepares each statement once per
// connection and caches it.
//
//   - Acquire, dynamic: one statement on PostgreSQL and SQLite, two on
//     MySQL. On PostgreSQL and SQLite, UPDATE ... WHERE node = (SELECT
//     node ... ORDER BY expires_at, node LIMIT 1) RETURNING takes the first
//     free node (PostgreSQL's subquery locks it with FOR UPDATE SKIP
//     LOCKED; a SQLite statement holds the write lock from its start). On
//     MySQL a SELECT reads the first free node without a lock and an UPDATE
//     takes it if its token is still the one read; if another client took
//     it in between, Acquire reads again. The first dynamic Acquire of a
//     Leaser runs a SELECT before the take, which counts the pool's rows
//     (two statements, three on MySQL), and when rows are missing an
//     INSERT of them as well (INSERT IGNORE on MySQL, ON CONFLICT DO
//     NOTHING elsewhere; three statements, four on MySQL). When the take
//     finds no free node, the same SELECT tells a full pool, refused with
//     [idgen.ErrNoFreeNode] after two statements (three on MySQL), from one
//     whose rows are missing or that has a free node now (on PostgreSQL,
//     one another client is taking and holds locked): then Acquire fills in
//     the rows or waits a little, and takes again. It fails with
//     [idgen.ErrNoFreeNode] only when no node was free, never because
//     others made progress.
//   - Acquire, static: one upsert that takes the node only if its lease
//     has ended or it was never used, INSERT ... ON CONFLICT DO UPDATE ...
//     RETURNING; on MySQL two, INSERT ... ON DUPLICATE KEY UPDATE and a
//     SELECT of the outcome.
//   - Renew: one UPDATE ... RETURNING; on MySQL one UPDATE that hands the
//     new mark back through LAST_INSERT_ID(expr), and a SELECT only when
//     MySQL reports the row unchanged (a renewal within the microsecond of
//     the last, counted as unchanged without clientFoundRows).
//   - Release: one UPDATE.
//
// On MySQL every statement that writes a row reaches it through the primary
// key (FORCE INDEX (PRIMARY)) and locks that one row, then moves the row's
// entry within the index on (pool, expires_at, node); none locks that
// index's entries. An UPDATE ... ORDER BY expires_at, node LIMIT 1 would:
// it would lock its entries, and the gaps between them, before the row, the
// opposite order of a static Acquire, a Renew or a Release, and could
// deadlock with them. Acquire's SELECT reads through that index (FORCE
// INDEX) without a lock. The INSERT of missing rows, the one statement
// that locks many rows, locks them in node order.
//
// A call that fails after the database may have granted a node — the answer
// to a statement lost with the connection — does not hold it for nothing:
// Acquire looks for a live lease under the token it generated, in one
// SELECT, and returns it while its context lasts or releases it, in one
// UPDATE, once the context has ended.
//
// # Clock
//
// Every lease starts, ends and is compared by the database's clock, read
// once per statement — UTC_TIMESTAMP(6) on MySQL, statement_timestamp() on
// PostgreSQL, julianday('now') on SQLite (whose clock is the host's, shared
// by every process using the file) — never by the clock of the process
// calling, so holders on hosts with skewed clocks agree. Times are
// microseconds (SQLite's clock ticks in milliseconds), and MySQL's are free
// of the session's time zone.
//
// # High-water mark
//
// The high_water column holds each node's high-water mark in microseconds
// since the Unix epoch, rounded up: every ID issued with the node lies
// before it. It is the holders' clock, not the database's. Renew raises it
// with GREATEST (max on SQLite) to the end of the window its holder may
// issue in, and never lowers it, so that it covers a holder that is killed.
// Release sets it to the holder's exact mark, which may lie below what the
// renewals reserved, so that the next holder after a clean stop need not
// wait out the window; but never below granted_high_water, the mark the
// lease was granted with, which covers every earlier holder. The mark stays
// in the row when the lease ends, and Acquire returns it to the next holder
// as [idgen.Lease].HighWater.
//
// # Durability
//
// An SQL database keeps what it committed, so a Leaser has no lost-data
// fence and never returns [idgen.ErrPoolRecovering]. That holds only while
// the rows stay: deleting a pool's rows, or restoring the table from a
// backup older than the live leases, loses high-water marks and live
// leases, and the next holders may issue IDs that were issued before. Do
// either only when every generator of the pool has stopped and the clocks
// have passed the lost marks, or start a new pool name.
//
// # WORKER_NODE mode
//
// [WorkerNodes] inserts a row per start into a table shaped like
// uid-generator's WORKER_NODE (host name, port, type, launch date, modified
// and created times) and uses the row's auto-increment id as the node id
// itself: node = id, so node 0 is never used and the ids run from 1, as in
// uid-generator, whose Java processes can share the table (name it in
// [WorkerNodesConfig.Table]) when they use the same layout. A node is never
// granted again, so its lease has a TTL of 0 and needs no renewal; Release
// only records the end as the modified time. Every start uses up an id: once
// the ids pass the layout's largest node id (a 22-bit node field, as
// uid-generator's, lasts 4,194,303 starts), Acquire fails with an error
// wrapping [idgen.ErrNodeRange]. The fix is a layout with more node bits,
// or emptying the table and resetting its counter (TRUNCATE on MySQL,
// TRUNCATE ... RESTART IDENTITY on PostgreSQL, deleting the table's
// sqlite_sequence row as well on SQLite) after every process using its ids
// has stopped.
//
// # Segments
//
// [Segments] keeps Leaf's (Meituan) segment table: a row per tag (biz_tag)
// holding max_id, the end of the last segment reserved; step, the length
// of a segment asked for without one; description; update_time, the
// database's time of the last change; and one column Leaf lacks, max_limit,
// the highest value max_id may reach (0 for none; seed 004's
// max_limit_id). The default table is idemq_segment ([SegmentsConfig]).
//
// Leaf reserves a segment in a transaction of two statements, UPDATE
// leaf_alloc SET max_id = max_id + step WHERE biz_tag = ? and a SELECT of
// the row, and the segment is [max_id - step, max_id). [Segments.NextSegment]
// reserves the same segment in one statement, one round trip, which
// commits on its own:
//
//	UPDATE t SET max_id = max_id + step, update_time = now
//	WHERE biz_tag = ? AND max_id <= (max_limit, or the largest BIGINT if 0) - step
//	RETURNING max_id, step, max_limit          -- PostgreSQL and SQLite
//
// MySQL and MariaDB return no rows from an UPDATE, so there the new value
// comes back in the OK packet, as the statement's insert id: SET max_id =
// LAST_INSERT_ID(max_id + ?). The statement is prepared once per
// connection, so that github.com/go-sql-driver/mysql sends it in one round
// trip whether or not the DSN sets interpolateParams. Since MySQL hands back
// that one value only, a Segments there reads a tag's stored step and
// maximum once, at its first segment of the tag, to fill in
// [idgen.Segment].Step and Max and to size a segment asked for with step 0;
// a step changed in the table later still sizes that Segments' step-0
// segments until a segment comes short or fails, and a maximum another
// process sets shows in Segment.Max from then too (the UPDATE checks the
// row's own, always).
//
// When the UPDATE matches nothing, NextSegment reads the row (one more
// statement; two on MySQL without interpolateParams): no row is
// [idgen.ErrUnknownTag]; a max_id at the maximum is [idgen.ErrMaxReached],
// and nothing changed; fewer IDs left than the step are reserved, all of
// them, by the same conditional UPDATE, tried again if another client took
// some in between.
//
// Against Leaf's table: Leaf runs on MySQL only; its rows need max_limit
// added, after which Leaf's servers and this package can share the table
// and the tags (Leaf ignores the maximum, so a tag with one should be
// served by this package only):
//
//	ALTER TABLE leaf_alloc ADD COLUMN max_limit BIGINT NOT NULL DEFAULT 0;
//
// and pass SegmentsConfig{Table: "leaf_alloc"}. Leaf's update_time is a
// TIMESTAMP in the session's time zone; Segments writes UTC_TIMESTAMP(6)
// into its own DATETIME(6) column, and reads either back through
// TIMESTAMPDIFF. A Leaf tag whose max_id is still 1 gives its first segment
// from 1, as Leaf does.
//
// [Segments.CreateTag], [Segments.Tag], [Segments.Tags] and
// [Segments.SetMax] are the operator's calls. Tag names are 1 to 128 bytes
// of UTF-8, compared byte for byte (utf8mb4_bin on MySQL); the stored step
// is 1 to 2^31-1 (Leaf's INT column).
//
// # Schema
//
// [Leaser.Migrate] runs, for the default table:
//
// MySQL and MariaDB (times in UTC):
//
//	CREATE TABLE IF NOT EXISTS `idemq_worker_lease` (
//		pool       VARBINARY(64)  NOT NULL,
//		node       BIGINT         NOT NULL,
//		token      VARBINARY(32)  NOT NULL,
//		owner      VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,
//		granted_at DATETIME(6)    NOT NULL,
//		expires_at DATETIME(6)    NOT NULL,
//		freed_at   DATETIME(6)    NULL,
//		high_water BIGINT         NOT NULL,
//		granted_high_water BIGINT NOT NULL,
//		PRIMARY KEY (pool, node),
//		KEY `idemq_worker_lease_free` (pool, expires_at, node)
//	) ENGINE = InnoDB;
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS "idemq_worker_lease" (
//		pool       text COLLATE "C" NOT NULL CHECK (octet_length(pool) BETWEEN 1 AND 64),
//		node       bigint NOT NULL CHECK (node >= 0),
//		token      text NOT NULL,
//		owner      text NOT NULL,
//		granted_at timestamptz NOT NULL,
//		expires_at timestamptz NOT NULL,
//		freed_at   timestamptz,
//		high_water bigint NOT NULL,
//		granted_high_water bigint NOT NULL,
//		PRIMARY KEY (pool, node)
//	);
//	CREATE INDEX IF NOT EXISTS "idemq_worker_lease_free" ON "idemq_worker_lease" (pool, expires_at, node);
//
// SQLite (times in microseconds since the Unix epoch):
//
//	CREATE TABLE IF NOT EXISTS "idemq_worker_lease" (
//		pool       TEXT    NOT NULL,
//		node       INTEGER NOT NULL,
//		token      TEXT    NOT NULL,
//		owner      TEXT    NOT NULL,
//		granted_at INTEGER NOT NULL,
//		expires_at INTEGER NOT NULL,
//		freed_at   INTEGER,
//		high_water INTEGER NOT NULL,
//		granted_high_water INTEGER NOT NULL,
//		PRIMARY KEY (pool, node)
//	) WITHOUT ROWID;
//	CREATE INDEX IF NOT EXISTS "idemq_worker_lease_free" ON "idemq_worker_lease" (pool, expires_at, node);
//
// [WorkerNodes.Migrate] runs, for the default table (its times are for
// operators only, written as uid-generator writes them: NOW() in the
// session's time zone on MySQL):
//
// MySQL and MariaDB:
//
//	CREATE TABLE IF NOT EXISTS `idemq_worker_node` (
//		id          BIGINT      NOT NULL AUTO_INCREMENT,
//		host_name   VARCHAR(64) NOT NULL,
//		port        VARCHAR(64) NOT NULL,
//		type        INT         NOT NULL,
//		launch_date DATE        NOT NULL,
//		modified    DATETIME    NOT NULL,
//		created     DATETIME    NOT NULL,
//		PRIMARY KEY (id)
//	) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS "idemq_worker_node" (
//		id          bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
//		host_name   varchar(64) NOT NULL,
//		port        varchar(64) NOT NULL,
//		type        integer NOT NULL,
//		launch_date date NOT NULL,
//		modified    timestamptz NOT NULL,
//		created     timestamptz NOT NULL
//	);
//
// SQLite (AUTOINCREMENT, so that no id is handed out twice):
//
//	CREATE TABLE IF NOT EXISTS "idemq_worker_node" (
//		id          INTEGER PRIMARY KEY AUTOINCREMENT,
//		host_name   TEXT    NOT NULL,
//		port        TEXT    NOT NULL,
//		type        INTEGER NOT NULL,
//		launch_date TEXT    NOT NULL,
//		modified    TEXT    NOT NULL,
//		created     TEXT    NOT NULL
//	);
//
// [Segments.Migrate] runs, for the default table:
//
// MySQL and MariaDB (times in UTC):
//
//	CREATE TABLE IF NOT EXISTS `idemq_segment` (
//		biz_tag     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
//		max_id      BIGINT       NOT NULL DEFAULT 1,
//		step        INT          NOT NULL,
//		max_limit   BIGINT       NOT NULL DEFAULT 0,
//		description VARCHAR(256) CHARACTER SET utf8mb4 DEFAULT NULL,
//		update_time DATETIME(6)  NOT NULL,
//		PRIMARY KEY (biz_tag)
//	) ENGINE = InnoDB;
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS "idemq_segment" (
//		biz_tag     varchar(128) NOT NULL PRIMARY KEY,
//		max_id      bigint       NOT NULL DEFAULT 1,
//		step        integer      NOT NULL,
//		max_limit   bigint       NOT NULL DEFAULT 0,
//		description varchar(256),
//		update_time timestamptz  NOT NULL
//	);
//
// SQLite (update_time in microseconds since the Unix epoch):
//
//	CREATE TABLE IF NOT EXISTS "idemq_segment" (
//		biz_tag     TEXT    NOT NULL PRIMARY KEY,
//		max_id      INTEGER NOT NULL DEFAULT 1,
//		step        INTEGER NOT NULL,
//		max_limit   INTEGER NOT NULL DEFAULT 0,
//		description TEXT,
//		update_time INTEGER NOT NULL
//	) WITHOUT ROWID;
//
// [Leaser.Schema], [WorkerNodes.Schema] and [Segments.Schema] return the
// statements for a configured table name.
package sqlidgen
