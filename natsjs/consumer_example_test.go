package natsjs_test

import (
	"context"
	"database/sql"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // "sqlite"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

// A durable pull consumer whose handler runs at most once per key,
// draining on SIGTERM. (Compiled, not run: it needs a nats-server and
// Redis.)
func ExamplePull() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := redisdedupe.New(rdb, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// MaxDeliver below is the max reconsume times plus one.
	c, err := consumer.New(store, "order-service", consumer.WithMaxReconsumeTimes(16))
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect("nats://127.0.0.1:4222", natsjs.RouteLogs(slog.Default()))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Drain() // after Run has drained: sends the last acknowledgements
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	jc, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
		Durable:    "order-service",
		AckPolicy:  jetstream.AckExplicitPolicy,
		AckWait:    30 * time.Second,
		MaxDeliver: 17,
	})
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m *consumer.Message) error {
		return nil // apply the order; an error has the message delivered again
	}
	r, err := natsjs.Pull(c, jc, handle, natsjs.PullConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// Until SIGTERM; then the running handlers finish first.
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
}

// Exactly-once effects with SQL: the handler writes in the transaction
// whose first statement recorded the message's key, and one commit
// applies both. (Compiled, not run: it needs a nats-server.)
func ExamplePull_exactlyOnce() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := sql.Open("sqlite", "file:billing.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := sqldedupe.New(db, dialect.SQLite, sqldedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, "billing", consumer.WithMaxReconsumeTimes(16),
		consumer.WithGuard(dedupe.GuardConfig{Retention: 7 * 24 * time.Hour}))
	if err != nil {
		log.Fatal(err)
	}
	pay, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO payments (order_id, body) VALUES (?, ?)", msgkey.Of(m), m.Body)
		return err // nil commits the payment with the key; an error rolls both back
	})
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
	jc, err := js.Consumer(ctx, "ORDERS", "billing")
	if err != nil {
		log.Fatal(err)
	}
	r, err := natsjs.Pull(c, jc, pay, natsjs.PullConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
}
