package remoting_test

import (
	"context"
	"database/sql"
	"log"
	"os/signal"
	"syscall"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// A relay process: it ships the outbox table's rows to RocketMQ until it
// is told to stop, then drains. Run as many as you like over one table.
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
	// The hash selector keeps each ordering key in one queue.
	rp, err := rocketmq.NewProducer(
		rmqproducer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:9876"})),
		rmqproducer.WithQueueSelector(rmqproducer.NewHashQueueSelector()),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		log.Fatal(err)
	}
	defer rp.Shutdown()
	s, err := remoting.NewOutboxSender(rp)
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
