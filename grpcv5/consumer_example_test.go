package grpcv5_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/grpcv5"
)

// A SimpleConsumer whose handler runs at most once per key, draining on
// SIGTERM. (Compiled, not run: it needs a RocketMQ 5 proxy and Redis.)
func ExampleSimple() {
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
	sc, err := golang.NewSimpleConsumer(&golang.Config{
		Endpoint:      "127.0.0.1:8081",
		ConsumerGroup: "order-service",
		Credentials:   &credentials.SessionCredentials{},
	},
		golang.WithSimpleAwaitDuration(5*time.Second),
		golang.WithSimpleSubscriptionExpressions(map[string]*golang.FilterExpression{"orders": golang.SUB_ALL}),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		log.Fatal(err)
	}
	defer sc.GracefulStop() // after Run has drained
	handle := func(ctx context.Context, m *consumer.Message) error {
		return nil // apply the order; an error has the message delivered again
	}
	r, err := grpcv5.Simple(c, sc, handle, grpcv5.SimpleConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// Until SIGTERM; then the messages in hand finish first.
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
}

// A PushConsumer with the idempotent listener, drained on SIGTERM.
// (Compiled, not run: it needs a RocketMQ 5 proxy and Redis.)
func ExamplePush() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	store, err := redisdedupe.New(client, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// The group's retryMaxTimes, so that a busy key on a message's last
	// attempt is waited for rather than handed back.
	c, err := consumer.New(store, "order-service", consumer.WithMaxReconsumeTimes(16))
	if err != nil {
		log.Fatal(err)
	}
	l, err := grpcv5.Push(c, func(ctx context.Context, m *consumer.Message) error {
		return nil // apply the order; an error has the message delivered again
	})
	if err != nil {
		log.Fatal(err)
	}
	pc, err := golang.NewPushConsumer(&golang.Config{
		Endpoint:      "127.0.0.1:8081",
		ConsumerGroup: "order-service",
		Credentials:   &credentials.SessionCredentials{},
	},
		golang.WithPushMessageListener(l),
		golang.WithPushSubscriptionExpressions(map[string]*golang.FilterExpression{"orders": golang.SUB_ALL}),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
	// Instead of pc.GracefulStop(): bounded, and what runs finishes first.
	drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Drain(drain, pc); err != nil {
		log.Print(err)
	}
}
