package sqlidgen_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

// openExample opens a SQLite file in a temporary directory, in WAL mode with
// a busy timeout, as the package documentation advises. remove deletes it.
func openExample() (db *sql.DB, remove func()) {
	dir, err := os.MkdirTemp("", "sqlidgen-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "ids.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// A sending process takes its IDs from a generator on a node id leased
// from a pool in its database (the dedupe store's will do), so that no two
// senders ever issue the same ID; Close gives the node back.
func ExampleLease() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, remove := openExample()
	defer remove()

	gen, err := sqlidgen.Lease(ctx, db, dialect.SQLite, "senders") // creates the table if missing
	if err != nil {
		log.Fatal(err)
	}
	defer gen.Close() // releases the node
	id, err := gen.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node", gen.Node(), "issued an ID:", id > 0)
	// Output: node 0 issued an ID: true
}
