package consumer_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	_ "modernc.org/sqlite" // "sqlite"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/msgkey"
)

// A payment is written in the transaction Tx hands the handler, whose first
// statement recorded its message's key: one commit applies both. The first
// attempt fails after its write, which rolls back with the key; the retry
// pays; the duplicate is acknowledged without paying again.
func ExampleConsumer_Tx() {
	ctx := context.Background()
	// A real program opens a file; see package sqldedupe. One connection
	// keeps ":memory:" one database.
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	store, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE payments (order_id TEXT, cents INTEGER)"); err != nil {
		log.Fatal(err)
	}

	c, err := consumer.New(store, "billing")
	if err != nil {
		log.Fatal(err)
	}
	attempts := 0
	pay := func(ctx context.Context, tx *sql.Tx, msg *consumer.Message) error {
		attempts++
		order := msgkey.Of(msg)
		fmt.Printf("paying %s, attempt %d\n", order, attempts)
		if _, err := tx.ExecContext(ctx, "INSERT INTO payments VALUES (?, ?)", order, 1999); err != nil {
			return err
		}
		if attempts == 1 {
			return errors.New("fraud check timed out")
		}
		return nil
	}
	h, err := c.Tx(pay)
	if err != nil {
		log.Fatal(err)
	}
	// What a client adapter does with each delivery (see package
	// remoting or grpcv5).
	delivery := consumer.Message{ID: "7F0000010001", Properties: map[string]string{msgkey.Property: "order-42"}}
	for range 3 {
		if v := adapter.Process(ctx, c, []consumer.Message{delivery}, h, adapter.Waiting{}, nil)[0]; v.Action == adapter.Ack {
			fmt.Println("acknowledged")
		} else {
			fmt.Println("retry later:", v.Err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payments").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("payments:", n)
	// Output:
	// paying order-42, attempt 1
	// retry later: message 7F0000010001: failed: fraud check timed out
	// paying order-42, attempt 2
	// acknowledged
	// acknowledged
	// payments: 1
}
