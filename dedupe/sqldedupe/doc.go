// Package sqldedupe is a [dedupe.Store] and [dedupe.Batcher] in one SQL
// table, for MySQL and MariaDB, PostgreSQL and SQLite. It imports only
// database/sql: a program links the one driver it opens its *sql.DB with.
//
//	db, err := sql.Open("pgx", dsn)
//	...
//	store, err := sqldedupe.New(db, sqldedupe.Postgres, sqldedupe.Config{})
//	...
//	defer store.Close()
//	if err := store.Migrate(ctx); err != nil { ... }
//
// [New] takes the *sql.DB and its [Dialect], which are required, and a
// [Config] whose zero value works; each field's documentation states its
// default.
//
// # Drivers
//
// The dialects are those of sqlidgen, from the same versions:
//
//   - MySQL 5.7 or later and MariaDB 10.5 or later, the oldest that
//     github.com/go-sql-driver/mysql supports, with any DSN options
//     (parseTime, loc, time_zone, clientFoundRows and interpolateParams all
//     work).
//   - PostgreSQL 10 or later: pgx's database/sql driver,
//     github.com/jackc/pgx/v5/stdlib, which sends the arrays batches travel
//     in.
//   - SQLite 3.35 or later (for RETURNING): modernc.org/sqlite or another
//     driver. Use a file in WAL mode with a busy timeout, and BEGIN
//     IMMEDIATE for transactions that write, so that writers wait for each
//     other instead of failing:
//     file:dedupe.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate
//
// # Clock
//
// Every lease and retention starts, ends and is compared by the database's
// clock, read once per statement — UTC_TIMESTAMP(6) on MySQL,
// statement_timestamp() on PostgreSQL, julianday('now') on SQLite — never by
// the clock of the process calling, so consumers on hosts with skewed clocks
// agree. [dedupe.ClaimResult] Until and Remaining come from that clock too.
// Times are microseconds (SQLite's clock ticks in milliseconds), and MySQL's
// are free of the session's time zone.
//
// # Round trips
//
// Each call is one statement, prepared and reused (a transaction's
// statements and those past the cache of prepared statements are sent as
// they are):
//
//   - Claim and ClaimBatch: one INSERT that takes over expired records in
//     place (ON CONFLICT DO UPDATE ... RETURNING on PostgreSQL and SQLite,
//     ON DUPLICATE KEY UPDATE on MySQL). MySQL cannot return rows from it,
//     so when a key was not acquired, a second statement reads the records
//     that answer the batch. A record that ended between the two still
//     answers, with the shortest Remaining (the claim met it live); keys
//     whose records were deleted meanwhile are asked again in a transaction
//     (BEGIN, the INSERT, the read, COMMIT) that holds their rows from the
//     insert to the read, so a claim always reaches an answer however fast
//     other clients release and claim.
//   - Complete and CompleteBatch: one UPDATE (an upsert on PostgreSQL, see
//     below). On MySQL, a batch in which some but not all tickets lost their
//     lease reads their records to tell which.
//   - Release and ReleaseBatch: one DELETE (an upsert on PostgreSQL). On
//     MySQL a batch of more than one key is a transaction of two statements.
//   - Extend: one UPDATE.
//
// On PostgreSQL, Complete and Release are INSERT ... ON CONFLICT DO UPDATE
// statements too, which reach each row through the primary key whatever the
// planner's statistics say; a prepared UPDATE joined to the batch would keep
// the plan it made while the table was small. Release leaves the record
// expired rather than deleted, and a ticket for a key with no record leaves
// an expired row; the next claim or the cleanup takes either.
//
// A batch of more than 256 keys takes a statement per 256. A batch that
// names a key twice takes a statement per occurrence, because the answers
// must be those of single calls made one after another. Such a claim runs
// its statements in one transaction (BEGIN and COMMIT besides), so that one
// failing part-way, its deadline passing or its connection lost, takes no
// key: its caller never learns the tokens, and the keys its first statements
// took would otherwise stay held for a whole lease.
//
// # Retries
//
// A claim draws its tokens once, so a statement that runs twice (database/sql
// sends it again when the driver reports the connection bad) finds the
// records it wrote and answers Acquired with their tokens, never in flight
// to its own caller. A statement or transaction the database rolls back to
// break a deadlock (MySQL's error 1213, SQLSTATE class 40 on PostgreSQL)
// runs again, so that no call fails because other clients make progress;
// MySQL deadlocks under heavy churn, when several clients claim a key whose
// record a release has just deleted. Inside a caller's transaction
// ([Store.CompleteTx]) the rollback took the caller's work too: the error
// is returned, and the caller retries its transaction.
//
// # Exactly once with a transaction
//
// When a handler's effects live in the same database, [Store.CompleteTx]
// records its claimed key as done inside the handler's transaction, one
// statement: the effects and the record commit together or not at all, so
// no failure between them can run the effect twice or lose it. The
// consumer's transactional handler does this for every message, through
// [dedupe.CompleteTx].
//
// # Cleanup
//
// Records stay in the table after their lease or retention ends; a claim
// takes such a record over in place. A goroutine started by [New] deletes
// them every [Config.CleanupInterval] in statements of at most
// [Config.CleanupBatch] rows (DELETE ... LIMIT on MySQL, a ctid batch that
// skips locked rows on PostgreSQL), until [Store.Close]. Retention must
// exceed the broker's redelivery horizon, or a late redelivery runs again.
//
// # Inspecting
//
// Store is a [dedupe.Inspector] too, each call one statement through the
// primary key, showing only records live by the database's clock. List
// pages by key from the last one listed (keyset pagination, a range scan of
// the index however deep the listing goes), a prefix being a range of keys
// rather than a LIKE, whose '%' and '_' keys may hold; Stats is one COUNT
// grouped by state over the group's index range, O(the group's records).
//
// Forget deletes a record whatever its state. It is for reprocessing after
// a bad deploy: the key's next delivery runs its handler again, side
// effects included, and a consumer still holding the key loses its lease
// (its Complete fails with [dedupe.ErrLeaseLost]).
//
// # Schema
//
// One table holds every record, keyed by namespace, consumer group and key;
// a key is compared byte for byte, case and trailing spaces included.
// expires_at is the lease's end while the record is processing and the
// retention's end once it is done; an index on it serves the cleanup.
// [Store.Migrate] runs, for the default table:
//
// MySQL and MariaDB (VARBINARY rather than a utf8mb4_bin VARCHAR, whose
// comparisons ignore trailing spaces; times in UTC):
//
//	CREATE TABLE IF NOT EXISTS `idemq_dedupe` (
//		namespace   VARBINARY(64)  NOT NULL,
//		grp         VARBINARY(255) NOT NULL,
//		k           VARBINARY(255) NOT NULL,
//		state       ENUM('processing', 'done') NOT NULL,
//		token       VARBINARY(32)  NOT NULL,
//		fingerprint VARBINARY(128) NOT NULL,
//		expires_at  DATETIME(6)    NOT NULL,
//		created_at  DATETIME(6)    NOT NULL,
//		updated_at  DATETIME(6)    NOT NULL,
//		PRIMARY KEY (namespace, grp, k),
//		KEY `idemq_dedupe_expires_at` (expires_at)
//	) ENGINE = InnoDB;
//
// PostgreSQL:
//
//	CREATE TABLE IF NOT EXISTS "idemq_dedupe" (
//		namespace   text COLLATE "C" NOT NULL CHECK (octet_length(namespace) <= 64),
//		grp         text COLLATE "C" NOT NULL CHECK (octet_length(grp) BETWEEN 1 AND 255),
//		k           text COLLATE "C" NOT NULL CHECK (octet_length(k) BETWEEN 1 AND 255),
//		state       text NOT NULL CHECK (state IN ('processing', 'done')),
//		token       text NOT NULL,
//		fingerprint text NOT NULL CHECK (octet_length(fingerprint) <= 128),
//		expires_at  timestamptz NOT NULL,
//		created_at  timestamptz NOT NULL,
//		updated_at  timestamptz NOT NULL,
//		PRIMARY KEY (namespace, grp, k)
//	);
//	CREATE INDEX IF NOT EXISTS "idemq_dedupe_expires_at" ON "idemq_dedupe" (expires_at);
//
// SQLite (times in microseconds since the Unix epoch):
//
//	CREATE TABLE IF NOT EXISTS "idemq_dedupe" (
//		namespace   TEXT    NOT NULL,
//		grp         TEXT    NOT NULL,
//		k           TEXT    NOT NULL,
//		state       TEXT    NOT NULL,
//		token       TEXT    NOT NULL,
//		fingerprint TEXT    NOT NULL,
//		expires_at  INTEGER NOT NULL,
//		created_at  INTEGER NOT NULL,
//		updated_at  INTEGER NOT NULL,
//		PRIMARY KEY (namespace, grp, k)
//	) WITHOUT ROWID;
//	CREATE INDEX IF NOT EXISTS "idemq_dedupe_expires_at" ON "idemq_dedupe" (expires_at);
//
// [Store.Schema] returns the statements for a configured table name.
package sqldedupe
