package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// A billing service consumes orders and emits a payment request for each,
// in the transaction that records the order's key. A duplicate of the
// order emits nothing; and since the request's key derives from the
// order's, a handler that ran again (its record forgotten, its topic
// replayed) would emit the same key, which the payment service would
// suppress.
func ExampleOutbox_Emit() {
	ctx := context.Background()
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
	// No key source: Emit derives every key.
	o, err := outbox.New(db, dialect.SQLite, nil, outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if err := o.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	c, err := consumer.New(store, "billing")
	if err != nil {
		log.Fatal(err)
	}
	h, err := c.Tx(func(ctx context.Context, tx *sql.Tx, msg *consumer.Message) error {
		// The service's own writes go through tx too.
		key, err := o.Emit(ctx, "payment", outbox.Message{Topic: "payments", Body: []byte("charge " + msgkey.Of(msg))})
		if err != nil {
			return err
		}
		fmt.Println("emitted", key)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// What a client adapter does with each delivery (see package
	// remoting or grpcv5).
	order := consumer.Message{ID: "7F0000010001", Properties: map[string]string{msgkey.Property: "order-42"}}
	adapter.Process(ctx, c, []consumer.Message{order}, h, adapter.Waiting{}, nil)
	adapter.Process(ctx, c, []consumer.Message{order}, h, adapter.Waiting{}, nil) // a duplicate: suppressed
	// Output:
	// emitted payment-ct7u36gl5e6kd2exiunpt6xkiz
}
