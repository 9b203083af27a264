package remoting_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// A push consumer whose handler runs at most once per key, and that drains
// on SIGTERM so that a rolling deploy doubles nothing. (Compiled, not run:
// it needs a name server and Redis.)
func ExampleConcurrently() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	store, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, "order-service")
	if err != nil {
		log.Fatal(err)
	}
	pc, err := rocketmq.NewPushConsumer(
		rmq.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:9876"})),
		rmq.WithGroupName("order-service"),
	)
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, msg *consumer.Message) error {
		// Apply the order here; an error has the message redelivered.
		log.Printf("applied order with key %s", msgkey.Of(msg))
		return nil
	}
	if err := pc.Subscribe("orders", rmq.MessageSelector{}, remoting.Concurrently(c, handle)); err != nil {
		log.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
	// Instead of pc.Shutdown(): running handlers finish and record first.
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := remoting.Drain(drain, c, pc); err != nil {
		log.Print(err)
	}
}

// An orderly push consumer whose queues change hands at once when the
// group changes. (Compiled, not run: it needs a name server and Redis.)
func ExampleHandBack() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	store, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, "order-service")
	if err != nil {
		log.Fatal(err)
	}
	ns := primitive.NewPassthroughResolver([]string{"127.0.0.1:9876"})
	pc, err := rocketmq.NewPushConsumer(
		rmq.WithNsResolver(ns),
		rmq.WithGroupName("order-service"),
		rmq.WithConsumerOrder(true),
		rmq.WithStrategy(remoting.HandBack(ns, rmq.AllocateByAveragely)),
	)
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, msg *consumer.Message) error {
		log.Printf("applied order with key %s, in its queue's order", msgkey.Of(msg))
		return nil
	}
	if err := pc.Subscribe("orders", rmq.MessageSelector{}, remoting.Orderly(c, handle)); err != nil {
		log.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		log.Fatal(err)
	}
	// ... and remoting.Drain(ctx, c, pc) on SIGTERM, as in ExampleConcurrently.
}
