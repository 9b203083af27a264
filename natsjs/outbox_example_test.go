package natsjs_test

import (
	"context"
	"database/sql"
	"log"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/natsjs"
	"github.com/idemq/idemq/outbox"
)

// A relay process: it ships the outbox table's rows to JetStream until it
// is told to stop, then drains. Each row's key is its message id, so a
// row shipped again after a crash is dropped by the stream's duplicate
// window. (Compiled, not run: it needs a nats-server.)
func ExampleNewOutboxSender() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := sql.Open("sqlite", "file:shop.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// Rows carry their keys, stamped by Add: the relay needs no key source.
	ob, err := outbox.New(db, dialect.SQLite, nil, outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	s, err := natsjs.NewOutboxSender(js)
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
	if err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
	relay.Close() // ships what it has claimed, up to DrainTimeout
	log.Printf("relay stopped: %+v", relay.Stats())
}
