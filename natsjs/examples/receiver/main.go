// Command receiver consumes a JetStream stream through a durable pull
// consumer and the idemq consumer, with a Redis dedupe store. Its handler
// credits each order's amount to a Redis hash and counts the runs per
// key, so a run shows each message applied once.
//
//	receiver -nats nats://127.0.0.1:4222 -redis 127.0.0.1:6379 -expect 200
//
// With -expect it stops once that many messages were applied and nothing
// new arrived for -idle, and prints: delivered=D suppressed=S applied=A.
// On SIGTERM or an interrupt it drains: running handlers finish and
// record their keys, and what it holds goes back to the server.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("receiver: ")
	url := flag.String("nats", os.Getenv("IDEMQ_NATS_URL"), "nats-server URL (default $IDEMQ_NATS_URL)")
	redisAddr := flag.String("redis", os.Getenv("IDEMQ_REDIS_ADDR"), "Redis host:port (default $IDEMQ_REDIS_ADDR)")
	stream := flag.String("stream", "IDEMQ_DEMO", "stream, created if missing")
	subject := flag.String("subject", "idemq.demo", "the stream's subject")
	durable := flag.String("durable", "idemq-demo-receiver", "durable consumer, and the dedupe group")
	expect := flag.Int64("expect", 0, "stop after this many messages were applied (0: run until interrupted)")
	idle := flag.Duration("idle", 2*time.Second, "with -expect, how long to wait for late duplicates before stopping")
	flag.Parse()
	if *url == "" || *redisAddr == "" {
		log.Fatal("set -nats and -redis (or IDEMQ_NATS_URL and IDEMQ_REDIS_ADDR)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.Fatalf("redis at %s (-redis): %v", *redisAddr, err)
	}
	store, err := redisdedupe.New(rdb, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, *durable, consumer.WithMaxReconsumeTimes(16))
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(*url, natsjs.RouteLogs(slog.Default()))
	if err != nil {
		log.Fatalf("nats-server %s (-nats): %v", *url, err)
	}
	defer nc.Drain() // after Run: sends the last acknowledgements
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: *stream, Subjects: []string{*subject}}); err != nil {
		log.Fatal(err)
	}
	jc, err := js.CreateOrUpdateConsumer(ctx, *stream, jetstream.ConsumerConfig{
		Durable: *durable, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 17})
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, m *consumer.Message) error {
		var order struct{ Order, Amount int64 }
		if err := json.Unmarshal(m.Body, &order); err != nil {
			return fmt.Errorf("bad body: %w", err)
		}
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.IncrBy(ctx, *durable+":balance", order.Amount)
			p.HIncrBy(ctx, *durable+":ledger", msgkey.Of(m), 1)
			return nil
		})
		return err
	}
	r, err := natsjs.Pull(c, jc, handle, natsjs.PullConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if *expect > 0 {
		go func() { // stop once -expect were applied and -idle passed quietly
			var last time.Time
			for n := int64(-1); ; time.Sleep(*idle / 4) {
				s := c.Stats()
				if s.Delivered != n {
					n, last = s.Delivered, time.Now()
				} else if s.Completed >= *expect && time.Since(last) > *idle {
					stop()
					return
				}
			}
		}()
	}
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
	s := c.Stats()
	fmt.Printf("delivered=%d suppressed=%d applied=%d\n", s.Delivered, s.Suppressed, s.Completed)
}
