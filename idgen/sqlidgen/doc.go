// Package sqlidgen keeps worker node ids and segment counters in an SQL
// database: MySQL 5.7+ or MariaDB 10.5+, PostgreSQL 10+, SQLite 3.35+.
//
//   - [Leaser] leases node ids from a pool, a row per node, for
//     [idgen.NewLeased]: a lease lasts [Config.Lease] by the database's
//     clock, a freed node goes to the tail of the pool's queue, and every
//     row keeps its node's high-water mark, so the next holder starts after
//     the last ID anyone issued with it.
//   - [WorkerNodes] hands out a new node id at every start from an
//     auto-increment column, as Baidu uid-generator's WORKER_NODE table does.
//   - [Segments] is a [segment.Store] over Meituan Leaf's table of tags,
//     one UPDATE per segment.
//
// It imports only database/sql: open the *sql.DB with the driver of your
// choice (go-sql-driver/mysql, pgx's stdlib, modernc.org/sqlite), then
// create the tables with Migrate or from Schema (see the Schema examples).
// The constructors take the *sql.DB and its dialect, the one value that
// [github.com/idemq/idemq/dedupe/sqldedupe] and
// [github.com/idemq/idemq/outbox] name too (dialect.MySQL,
// dialect.Postgres, dialect.SQLite); [New] takes a [Config] whose Pool
// and Size are required, and every other field's zero value works and
// states its default; [NewSegments] and [NewWorkerNodes] take the table's
// name, "" for the default.
//
//	leaser, err := sqlidgen.New(db, dialect.Postgres, sqlidgen.Config{Pool: "orders", Size: 1024})
//	...
//	if err := leaser.Migrate(ctx); err != nil { ... }
//	gen, err := idgen.NewLeased(ctx, leaser, idgen.Config{}, idgen.LeaseConfig{})
//
// Every statement commits on its own; the package runs no transactions.
// With go-sql-driver/mysql, interpolateParams=true in the DSN saves the
// round trip that prepares each statement. Use SQLite as a file in WAL mode
// with a busy timeout, so that writers wait for each other instead of
// failing:
//
//	file:ids.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate
//
// # Durability
//
// A database keeps what it committed, so a Leaser needs no fence against
// lost records as a Redis pool does, but only while the rows stay: deleting
// a pool's rows, or restoring the table from a backup older than the live
// leases, loses high-water marks and live leases, and the next holders may
// issue IDs that were issued before. Do either only when every generator of
// the pool has stopped and the clocks have passed the lost marks, or start
// a new pool name.
package sqlidgen
