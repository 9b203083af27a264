// Package sqldedupe is a [dedupe.Store] and [dedupe.Batcher] in one SQL
// table, on MySQL 5.7+ or MariaDB 10.5+, PostgreSQL 10+ and SQLite 3.35+
// (for RETURNING). It imports only database/sql: a program links the one
// driver it opens its *sql.DB with.
//
//	store, err := sqldedupe.New(db, sqldedupe.Postgres, sqldedupe.Config{})
//	...
//	defer store.Close()
//	if err := store.Migrate(ctx); err != nil { ... }
//
// [New] takes the *sql.DB and its [Dialect], which are required, and a
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
// is one statement (a batch one per 256 keys; see [Store.ClaimBatch]), and
// one the database rolls back to break a deadlock runs again.
//
// [Store.CompleteTx] records a claimed key done inside the handler's own
// transaction, so that its writes and the record commit together or not at
// all; the consumer's transactional handler (consumer.Consumer.Tx) uses it.
//
// Records stay in the table after their lease or retention ends, until a
// claim takes one over or the background cleanup deletes it
// ([Config.CleanupInterval]). Retention must exceed the broker's
// redelivery horizon, or a late redelivery runs again.
package sqldedupe
