package sqlidgen_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/idgen"
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

// Two processes lease node ids from a pool of two; a third finds none free
// until one of them releases its node, which keeps the high-water mark it
// wrote.
func Example() {
	ctx := context.Background()
	db, remove := openExample()
	defer remove()
	leaser, err := sqlidgen.New(db, sqldedupe.SQLite, sqlidgen.Config{Pool: "orders", Size: 2, Lease: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	if err := leaser.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	layout := idgen.Twitter // 10 node bits: node ids up to 1023
	req := func(owner string) idgen.LeaseRequest {
		return idgen.LeaseRequest{MaxNode: layout.MaxNode(), Owner: owner}
	}

	a, err := leaser.Acquire(ctx, req("host-a:101"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := leaser.Acquire(ctx, req("host-b:202"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a has node", a.Node, "for", a.TTL)
	fmt.Println("b has node", b.Node)

	_, err = leaser.Acquire(ctx, req("host-c:303"))
	fmt.Println("c:", errors.Is(err, idgen.ErrNoFreeNode))

	// a renews well within its lease, then stops: its last IDs were issued
	// before mark.
	mark := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if a, err = leaser.Renew(ctx, a, mark); err != nil {
		log.Fatal(err)
	}
	if err := leaser.Release(ctx, a, mark); err != nil {
		log.Fatal(err)
	}
	c, err := leaser.Acquire(ctx, req("host-c:303"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("c has node", c.Node, "issuing after", c.HighWater.Format(time.RFC3339))

	rows, err := leaser.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Printf("node %d: %s, held %v\n", r.Node, r.Owner, r.Held)
	}
	// Output:
	// a has node 0 for 10s
	// b has node 1
	// c: true
	// c has node 0 issuing after 2026-01-02T03:04:05Z
	// node 0: host-c:303, held true
	// node 1: host-b:202, held true
}
