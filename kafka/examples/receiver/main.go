// Command receiver consumes a Kafka topic through the idemq consumer with a
// Redis dedupe store, and counts what it applied, so that a run shows the
// duplicates delivered and suppressed.
//
//	receiver -brokers 127.0.0.1:9092 -redis 127.0.0.1:6379 -group billing -topic orders -expect 200
//
// With -expect it stops once that many records were applied and nothing
// new arrived for -idle, and prints: delivered=D suppressed=S applied=A.
// On SIGTERM or an interrupt it drains: running handlers finish and record
// their keys, and what was acknowledged is committed, before it leaves the
// group.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/kafka"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("receiver: ")
	brokers := flag.String("brokers", os.Getenv("IDEMQ_KAFKA_BROKERS"), "Kafka bootstrap host:port list, comma-separated (default $IDEMQ_KAFKA_BROKERS)")
	redisAddr := flag.String("redis", os.Getenv("IDEMQ_REDIS_ADDR"), "Redis host:port (default $IDEMQ_REDIS_ADDR)")
	group := flag.String("group", "", "consumer group, also the dedupe scope")
	topic := flag.String("topic", "idemq-demo", "topic to consume")
	expect := flag.Int64("expect", 0, "stop after this many records were applied (0: run until interrupted)")
	idle := flag.Duration("idle", 3*time.Second, "with -expect, how long to wait for late duplicates before stopping")
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		log.Fatalf("unexpected arguments %q: this command takes flags only (see -h)", flag.Args())
	case *brokers == "" || *redisAddr == "":
		log.Fatal("set -brokers and -redis (or IDEMQ_KAFKA_BROKERS and IDEMQ_REDIS_ADDR)")
	case *group == "":
		log.Fatal("no consumer group: set -group")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	defer rdb.Close()
	store, err := redisdedupe.New(rdb, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consumer.New(store, *group, consumer.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err)
	}
	var applied, last atomic.Int64
	handle := func(ctx context.Context, m *consumer.Message) error {
		applied.Add(1) // the side effect; an error has the record run again
		last.Store(time.Now().UnixNano())
		return nil
	}
	r, err := kafka.NewReceiver(c, handle, kafka.ReceiverConfig{},
		kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic))
	if err != nil {
		log.Fatal(err)
	}
	if *expect > 0 {
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		go func() { // stop once all came and the copies had time to come
			for ctx.Err() == nil && (applied.Load() < *expect || time.Since(time.Unix(0, last.Load())) < *idle) {
				time.Sleep(100 * time.Millisecond)
			}
			stop()
		}()
	}
	if err := r.Run(ctx); err != nil { // drains when ctx ends
		log.Print(err)
	}
	s := c.Stats()
	fmt.Printf("delivered=%d suppressed=%d applied=%d\n", s.Delivered, s.Suppressed, applied.Load())
}
