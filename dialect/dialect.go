// Package dialect names the SQL databases idemq's SQL packages speak:
// sqldedupe's dedupe store, sqlidgen's worker leases and segments, and the
// outbox each take a [Dialect] beside the *sql.DB, because database/sql
// does not say which database a driver talks to (and a wrapped driver, as
// otelsql makes, hides it).
package dialect

import "fmt"

// Dialect names the SQL a database speaks. The zero value names none.
type Dialect int

// The supported databases, each with the oldest version it is supported
// from and why. The tests run on MariaDB 10.11, PostgreSQL 15 and the
// SQLite of modernc.org/sqlite.
const (
	// MySQL is MySQL 5.7 or later, or MariaDB 10.5 or later, with InnoDB
	// and github.com/go-sql-driver/mysql: the oldest releases that driver
	// supports, and the statements need nothing newer (DATETIME(6), row
	// constructors, LAST_INSERT_ID(expr)). A statement with SKIP LOCKED
	// would need MySQL 8.0 or MariaDB 10.6.
	MySQL Dialect = iota + 1
	// Postgres is PostgreSQL 10 or later, for identity columns, with pgx's
	// database/sql driver (github.com/jackc/pgx/v5/stdlib), which encodes
	// the arrays that batches travel in.
	Postgres
	// SQLite is SQLite 3.35 or later, for RETURNING, such as the pure-Go
	// modernc.org/sqlite.
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}
