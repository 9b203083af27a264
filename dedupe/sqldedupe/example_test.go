package sqldedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
)

// openExample opens an in-memory SQLite database. One connection keeps it
// alive: each connection to ":memory:" would be a database of its own.
func openExample() *sql.DB {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// A message is claimed before its handler runs and completed after it
// succeeds; its redelivery is then recognised as done.
func Example() {
	ctx := context.Background()
	db := openExample()
	defer db.Close()
	store, err := sqldedupe.New(db, sqldedupe.SQLite, sqldedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	ref := dedupe.Ref{Group: "billing", Key: "order-42"}
	for delivery := 1; delivery <= 2; delivery++ {
		res, err := store.Claim(ctx, dedupe.ClaimRequest{Ref: ref, Lease: 30 * time.Second})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("delivery %d: %v\n", delivery, res.Status)
		if res.Status != dedupe.Acquired {
			continue
		}
		// ... the handler runs here ...
		if err := store.Complete(ctx, dedupe.Ticket{Ref: ref, Token: res.Token}, 72*time.Hour); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// delivery 1: acquired
	// delivery 2: done
}

// A handler whose effects live in the same database records the key in its
// own transaction: the payment and the record commit together, and a
// redelivery finds the key done and rolls back.
func ExampleStore_MarkDoneTx() {
	ctx := context.Background()
	db := openExample()
	defer db.Close()
	store, err := sqldedupe.New(db, sqldedupe.SQLite, sqldedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE payments (order_id TEXT, cents INTEGER)"); err != nil {
		log.Fatal(err)
	}

	pay := func(orderID string, cents int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // after Commit, a no-op
		ref := dedupe.Ref{Group: "billing", Key: orderID}
		if err := store.MarkDoneTx(ctx, tx, ref, 72*time.Hour); err != nil {
			return err
		}
		if _, err := tx.Exec("INSERT INTO payments VALUES (?, ?)", orderID, cents); err != nil {
			return err
		}
		return tx.Commit()
	}

	for delivery := 1; delivery <= 2; delivery++ {
		err := pay("order-42", 1999)
		switch {
		case errors.Is(err, sqldedupe.ErrDuplicate):
			fmt.Printf("delivery %d: duplicate, acknowledged\n", delivery)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("delivery %d: paid\n", delivery)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM payments").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments:", n)
	// Output:
	// delivery 1: paid
	// delivery 2: duplicate, acknowledged
	// payments: 1
}
