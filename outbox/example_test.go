package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// printer is a Sender that prints what it ships and says so on its
// channel; remoting.OutboxSender and grpcv5.OutboxSender ship to RocketMQ
// instead.
type printer chan string

func (p printer) Send(_ context.Context, m *outbox.Message) error {
	fmt.Printf("shipped %s to %s with key %s\n", m.Body, m.Topic, msgkey.Of(msgkey.Properties(m.Properties)))
	p <- msgkey.Of(msgkey.Properties(m.Properties))
	return nil
}

// An order and its message are written in one transaction; the relay
// ships the message once the transaction commits, with the key Add
// returned.
func Example() {
	dir, err := os.MkdirTemp("", "outbox")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)"); err != nil {
		log.Fatal(err)
	}
	gen, err := idgen.New(1, idgen.Config{})
	if err != nil {
		log.Fatal(err)
	}

	ob, err := outbox.New(db, dialect.SQLite, msgkey.FromIDs(gen), outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := ob.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES (42, 1999)"); err != nil {
		log.Fatal(err)
	}
	// A business key is kept; without one, Add stamps a key from gen.
	key, err := ob.Add(ctx, tx, outbox.Message{
		Topic:       "orders",
		Tags:        "created",
		Body:        []byte(`{"order":42,"amount":1999}`),
		OrderingKey: "order-42",
		Properties:  map[string]string{msgkey.Property: "order-42-created"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	shipped := make(printer, 1)
	relay, err := outbox.NewRelay(ob, shipped, outbox.RelayConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer relay.Close() // ships what it has claimed, then stops
	fmt.Println(<-shipped == key)
	// Output:
	// shipped {"order":42,"amount":1999} to orders with key order-42-created
	// true
}
