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
	"github.com/idemq/idemq/dialect"
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
	store, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// A single message is a batch of one.
	reqs := []dedupe.Item{{Ref: dedupe.Ref{Group: "billing", Key: "order-42"}}}
	for delivery := 1; delivery <= 2; delivery++ {
		res, errs, err := store.Claim(ctx, reqs, 30*time.Second)
		if err = errors.Join(err, errors.Join(errs...)); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("delivery %d: %v\n", delivery, res[0].Outcome)
		if res[0].Outcome != dedupe.Acquired {
			continue
		}
		// ... the handler runs here ...
		errs, err = store.Complete(ctx, []dedupe.Ticket{{Ref: reqs[0].Ref, Token: res[0].Token}}, 72*time.Hour)
		if err = errors.Join(err, errors.Join(errs...)); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// delivery 1: acquired
	// delivery 2: suppressed
}

// A handler whose effects live in the same database claims the key in its
// own transaction, as its first statement: one commit applies the payment
// and records the key done, and the redelivery finds it done. (The
// consumer's transactional mode, Consumer.Tx, does this for every
// message; see dedupe.GuardConfig.Tx.)
func ExampleStore_ClaimTx() {
	ctx := context.Background()
	db := openExample()
	defer db.Close()
	store, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{})
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

	ref := dedupe.Ref{Group: "billing", Key: "order-42"}
	deliver := func(cents int) (string, error) {
		tx, err := store.BeginTx(ctx)
		if err != nil {
			return "", err
		}
		defer tx.Rollback() // after Commit, a no-op
		res, err := store.ClaimTx(ctx, tx, dedupe.Item{Ref: ref}, 72*time.Hour)
		if err != nil {
			return "", err
		}
		if res.Outcome != dedupe.Acquired {
			return fmt.Sprintf("%v, acknowledged", res.Outcome), nil
		}
		if _, err := tx.Exec("INSERT INTO payments VALUES (?, ?)", ref.Key, cents); err != nil {
			return "", err
		}
		return "paid", tx.Commit()
	}
	for delivery := 1; delivery <= 2; delivery++ {
		what, err := deliver(1999)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("delivery %d: %s\n", delivery, what)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM payments").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments:", n)
	// Output:
	// delivery 1: paid
	// delivery 2: suppressed, acknowledged
	// payments: 1
}
