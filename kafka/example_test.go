package kafka_test

import (
	"context"
	"database/sql"
	"log"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/kafka"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// A producer that stamps each record's idempotency key into a header once,
// before its first produce. (Compiled, not run: it needs Kafka.)
func ExampleNewProducer() {
	ctx := context.Background()
	gen, err := idgen.New(1, idgen.Config{}) // a node of its own, as every sender's
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	p, err := kafka.NewProducer(cl, msgkey.FromIDs(gen))
	if err != nil {
		log.Fatal(err)
	}
	// The record's Key still picks its partition: the customer's orders
	// stay in order.
	r := &kgo.Record{Topic: "orders", Key: []byte("customer-7"), Value: []byte(`{"order":42}`)}
	for {
		// A record produced again after an error keeps its key.
		if _, err = p.ProduceSync(ctx, r); err == nil {
			break
		}
		log.Print(err)
		time.Sleep(time.Second)
	}
	log.Printf("sent %s", kafka.KeyOf(r))
}

// A group consumer whose handler runs at most once per key, draining on
// SIGTERM. (Compiled, not run: it needs Kafka and Redis.)
func ExampleNewReceiver() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	store, err := redisdedupe.New(rdb, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, "billing")
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m *consumer.Message) error {
		return nil // apply the order; an error has the record run again
	}
	r, err := kafka.NewReceiver(c, handle, kafka.ReceiverConfig{},
		kgo.SeedBrokers("127.0.0.1:9092"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		// Half of it is what a running handler has to finish on a revoke.
		kgo.RebalanceTimeout(2*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	// Until SIGTERM; then it drains: what runs finishes and is committed.
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
}

// Exactly-once effects with SQL: the handler's writes and the record's key
// commit in one transaction, and the offset is committed after it. (Compiled,
// not run: it needs Kafka and PostgreSQL.)
func ExampleNewReceiver_tx() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := sql.Open("pgx", "postgres://shop@127.0.0.1/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := sqldedupe.New(db, dialect.Postgres, sqldedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	c, err := consumer.New(store, "billing")
	if err != nil {
		log.Fatal(err)
	}
	pay, err := c.Tx(func(ctx context.Context, tx *sql.Tx, m *consumer.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO payments (order_key, body) VALUES ($1, $2)", msgkey.Of(m), m.Body)
		return err // an error rolls the payment and the key back; the record runs again
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := kafka.NewReceiver(c, pay, kafka.ReceiverConfig{},
		kgo.SeedBrokers("127.0.0.1:9092"), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"))
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
}

// A relay process: it ships the outbox table's rows to Kafka, each
// ordering key's rows to one partition, until it is told to stop, then
// drains. (Compiled, not run: it needs Kafka and PostgreSQL.)
func ExampleNewOutboxSender() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := sql.Open("pgx", "postgres://shop@127.0.0.1/shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	gen, err := idgen.New(1, idgen.Config{}) // a node of its own, as every sender's
	if err != nil {
		log.Fatal(err)
	}
	ob, err := outbox.New(db, dialect.Postgres, msgkey.FromIDs(gen), outbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	s, err := kafka.NewOutboxSender(cl)
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
