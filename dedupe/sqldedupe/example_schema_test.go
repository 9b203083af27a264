package sqldedupe_test

import (
	"database/sql"
	"fmt"
	"log"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
)

// The table Store.Migrate creates, for the default table name. One table
// holds every record, keyed by namespace, consumer group and key, each
// compared byte for byte (case and trailing spaces included: MySQL's keys
// are VARBINARY, since a utf8mb4_bin VARCHAR ignores trailing spaces).
// expires_at is the lease's end while a record is processing and the
// retention's end once it is done; its index serves the cleanup. MySQL's
// times are in UTC; SQLite's are microseconds since the Unix epoch.
func ExampleStore_Schema() {
	for _, d := range []dialect.Dialect{dialect.MySQL, dialect.Postgres, dialect.SQLite} {
		s, err := sqldedupe.New(&sql.DB{}, d, sqldedupe.Config{CleanupInterval: -1})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("-- %v\n", d)
		for _, stmt := range s.Schema() {
			fmt.Println(stmt + ";")
		}
	}
	// Output:
	// -- mysql
	// CREATE TABLE IF NOT EXISTS `idemq_dedupe` (
	// 	namespace   VARBINARY(64)  NOT NULL,
	// 	grp         VARBINARY(255) NOT NULL,
	// 	k           VARBINARY(255) NOT NULL,
	// 	state       ENUM('processing', 'done') NOT NULL,
	// 	token       VARBINARY(32)  NOT NULL,
	// 	fingerprint VARBINARY(128) NOT NULL,
	// 	expires_at  DATETIME(6)    NOT NULL,
	// 	created_at  DATETIME(6)    NOT NULL,
	// 	updated_at  DATETIME(6)    NOT NULL,
	// 	PRIMARY KEY (namespace, grp, k),
	// 	KEY `idemq_dedupe_expires_at` (expires_at)
	// ) ENGINE = InnoDB;
	// -- postgres
	// CREATE TABLE IF NOT EXISTS "idemq_dedupe" (
	// 	namespace   text COLLATE "C" NOT NULL CHECK (octet_length(namespace) <= 64),
	// 	grp         text COLLATE "C" NOT NULL CHECK (octet_length(grp) BETWEEN 1 AND 255),
	// 	k           text COLLATE "C" NOT NULL CHECK (octet_length(k) BETWEEN 1 AND 255),
	// 	state       text NOT NULL CHECK (state IN ('processing', 'done')),
	// 	token       text NOT NULL,
	// 	fingerprint text NOT NULL CHECK (octet_length(fingerprint) <= 128),
	// 	expires_at  timestamptz NOT NULL,
	// 	created_at  timestamptz NOT NULL,
	// 	updated_at  timestamptz NOT NULL,
	// 	PRIMARY KEY (namespace, grp, k)
	// );
	// CREATE INDEX IF NOT EXISTS "idemq_dedupe_expires_at" ON "idemq_dedupe" (expires_at);
	// -- sqlite
	// CREATE TABLE IF NOT EXISTS "idemq_dedupe" (
	// 	namespace   TEXT    NOT NULL,
	// 	grp         TEXT    NOT NULL,
	// 	k           TEXT    NOT NULL,
	// 	state       TEXT    NOT NULL,
	// 	token       TEXT    NOT NULL,
	// 	fingerprint TEXT    NOT NULL,
	// 	expires_at  INTEGER NOT NULL,
	// 	created_at  INTEGER NOT NULL,
	// 	updated_at  INTEGER NOT NULL,
	// 	PRIMARY KEY (namespace, grp, k)
	// ) WITHOUT ROWID;
	// CREATE INDEX IF NOT EXISTS "idemq_dedupe_expires_at" ON "idemq_dedupe" (expires_at);
}
