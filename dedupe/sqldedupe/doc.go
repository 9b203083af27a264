// Package sqldedupe is a [dedupe.Store] in one SQL
// table, on MySQL 5.7+ or MariaDB 10.5+, PostgreSQL 10+ and SQLite 3.35+
// (for RETURNING). It imports only database/sql: a program links the one
// driver it opens its *sql.DB with.
//
//	store, err := sqldedupe.New(db, dialect.Postgres, sqldedupe.Config{})
//	...
//	defer store.Close()
//	if err := store.Migrate(ctx); err != nil { ... }
//
// [New] takes the *sql.DB and its [dialect.Dialect], which are required, and a
// [Config] whose zero value works; each field states its default. Migrate
// creates the table; a migration tool can take the DDL from [Store.Schema]
// instead.
//
// Drivers: github.com/go-sql-driver/mysql, with any DSN options;
// github.com/jackc/pgx/v5/stdlib, which sends the arrays batches travel in;
// modernc.org/sqlite or another SQLite driver, on a file in WAL mode with a
// busy timeout and BEGIN IMMEDIATE, so that writers wait for each other
// instead of failing:
//
//	file:dedupe.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate
//
// Every lease and retention is measured by the database's clock, never the
// calling process's, so consumers on hosts with skewed clocks agree. A call
// is one statement (one per 256 keys; see [Store.Claim]), and
// one the database rolls back to break a deadlock runs again.
//
// The table keeps no completion's trace ([dedupe.Ticket.Trace]): that
// would take a column, and so a migration of every table in use, for a
// span link. A suppressed duplicate's span then links to nothing.
//
// # Transactions
//
// [Store.ClaimTx] claims a key as the first statement of the handler's own
// transaction ([Store.BeginTx]), writing its record done: one commit applies
// the handler's writes and records the key, or a rollback undoes both, and
// the row's lock holds the key meanwhile. The consumer's transactional mode
// (consumer.Consumer.Tx, dedupe.GuardConfig.Tx) claims so. A duplicate waits for
// the holder's outcome up to [Config.LockTimeout], then is busy; a consumer
// that dies holding a key leaves nothing behind, for the database rolls its
// transaction back when its connection closes. Records of both kinds share
// the table: a lease taken with [Store.Claim] keeps a key busy for a
// transaction until it ends, and the other way round.
//
// On SQLite there is one writer at a time: a transaction holds the whole
// database's write lock from its first write (the claim), or from BEGIN
// IMMEDIATE, to its end, so transactions run one after another, and a
// duplicate waits for the holder's outcome at its own BEGIN or claim. Busy
// there means that the write lock stayed taken for the connection's busy
// timeout (SQLITE_BUSY), whoever held it: the key is asked about again,
// as any busy key, without costing a retry.
//
// # Leases on SQLite
//
// A lease must outlast the time between its extensions plus the longest
// an extension waits for SQLite's one write lock. A Store queues its own
// writes in process, first come, first served, so that an extension waits
// for the writes ahead of it, with a WAL checkpoint that one of them may
// run: against six goroutines claiming and completing without a pause, on
// a two-core machine, 20 ms to 100 ms at most (1 ms at the median).
// Writers the Store cannot queue with (another process or Store on the
// file, the transactions of [Store.ClaimTx]) wait in SQLite's busy handler
// instead, which polls for the lock with sleeps that grow to 100 ms: an
// extension from another pool on the file waited up to 330 ms in the same
// test, and with every writer polling, as before the Store queued its own,
// 0.5 s to 1.7 s, losing leases of 300 ms in every run. The busy timeout
// bounds that wait: a lease longer than its extension interval plus the
// busy timeout outlasts the longest, as the defaults do (a 30 s lease
// extended every 10 s, the 5 s timeout of the DSN above).
//
// Records stay in the table after their lease or retention ends, until a
// claim takes one over or the background cleanup deletes it
// ([Config.CleanupInterval]). Retention must exceed the broker's
// redelivery horizon, or a late redelivery runs again; consumer.New
// refuses a shorter one.
package sqldedupe
