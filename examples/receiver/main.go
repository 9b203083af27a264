// Command receiver consumes a topic through the idemq consumer middleware
// with a Redis dedupe store. Its handler applies a visible side effect —
// it credits each order's amount to a Redis hash — and counts how often it
// ran, so a run shows that duplicates were delivered and suppressed.
//
//	receiver -namesrv 127.0.0.1:9876 -redis 127.0.0.1:6379 -topic orders -expect 200
//
// With -expect it stops once that many messages were applied and nothing
// new arrived for -idle, and prints: delivered=D suppressed=S applied=A.
// On SIGTERM or an interrupt it drains (remoting.Drain): running
// handlers finish and record their keys before the client shuts down.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqconsumer "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("receiver: ")
	namesrv := flag.String("namesrv", os.Getenv("IDEMQ_ROCKETMQ_NAMESRV"), "RocketMQ name server host:port (default $IDEMQ_ROCKETMQ_NAMESRV)")
	redisAddr := flag.String("redis", os.Getenv("IDEMQ_REDIS_ADDR"), "Redis host:port (default $IDEMQ_REDIS_ADDR)")
	topic := flag.String("topic", "idemq-demo", "topic to consume")
	group := flag.String("group", "idemq-demo-receiver", "consumer group")
	expect := flag.Int64("expect", 0, "stop after this many messages were applied (0: run until interrupted)")
	idle := flag.Duration("idle", 3*time.Second, "with -expect, how long to wait for late duplicates before stopping")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up waiting for the topic, or with -expect for the messages, after this long")
	drainTimeout := flag.Duration("drain", 30*time.Second, "on SIGTERM or interrupt, how long running handlers may take to finish")
	metrics := flag.Bool("metrics", false, "install the OpenTelemetry metrics SDK and print what the consumer reported at the end")
	flag.Parse()
	if flag.NArg() > 0 {
		// A stray word (a flag's value after a space, a mistyped flag
		// without its dash) would otherwise be ignored silently.
		log.Fatalf("unexpected arguments %q: this command takes flags only (see -h)", flag.Args())
	}
	if *namesrv == "" || *redisAddr == "" {
		log.Fatal("set -namesrv and -redis (or IDEMQ_ROCKETMQ_NAMESRV and IDEMQ_REDIS_ADDR)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := reachable(*namesrv); err != nil {
		log.Fatalf("name server %s (-namesrv): %v", *namesrv, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		log.Fatalf("redis at %s (-redis): %v", *redisAddr, err)
	}
	store, err := redisdedupe.New(rdb, redisdedupe.Config{})
	if err != nil {
		log.Fatal(err)
	}
	report := func(context.Context) error { return nil }
	if *metrics {
		report = installMetrics()
	}
	idem, err := consumer.New(store, *group)
	if err != nil {
		log.Fatal(err)
	}

	var applied, lastSeen, redelivered atomic.Int64
	ledger, balance := *topic+":ledger", *topic+":balance"
	handle := func(ctx context.Context, m *consumer.Message) error {
		var order struct{ Order, Amount int64 }
		if err := json.Unmarshal(m.Body, &order); err != nil {
			return fmt.Errorf("bad body: %w", err)
		}
		// The side effect: credit the order's amount to a balance and count
		// the credit in a ledger. Run twice, an order shows a count of 2.
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.IncrBy(ctx, balance, order.Amount)
			p.HIncrBy(ctx, ledger, msgkey.Of(m), 1)
			return nil
		})
		if err != nil {
			return err
		}
		applied.Add(1)
		return nil
	}
	// counted notes every delivery, duplicates included, before dedupe.
	type callback = func(context.Context, ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error)
	counted := func(next callback) callback {
		return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmqconsumer.ConsumeResult, error) {
			lastSeen.Store(time.Now().UnixNano())
			for _, m := range msgs {
				if m.ReconsumeTimes > 0 {
					redelivered.Add(1)
				}
			}
			return next(ctx, msgs...)
		}
	}

	topicCtx, cancel := context.WithTimeout(ctx, *timeout)
	err = waitForTopic(topicCtx, *namesrv, *topic)
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	c, err := rocketmq.NewPushConsumer(
		rmqconsumer.WithNsResolver(primitive.NewPassthroughResolver([]string{*namesrv})),
		rmqconsumer.WithGroupName(*group),
		rmqconsumer.WithInstance("receiver-"+strconv.Itoa(os.Getpid())),
		rmqconsumer.WithConsumeFromWhere(rmqconsumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe(*topic, rmqconsumer.MessageSelector{}, counted(remoting.Concurrently(idem, handle))); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	log.Printf("consuming %s as %s", *topic, *group)

	if *expect == 0 {
		<-ctx.Done()
	} else {
		// Every deferred delivery comes back; wait for those too.
		settled := func() bool {
			quiet := time.Since(time.Unix(0, lastSeen.Load())) > *idle
			return applied.Load() >= *expect && quiet && redelivered.Load() >= idem.Stats().Retried
		}
		waitDone(ctx, *timeout, settled)
	}
	// Drain rather than Shutdown: a handler cut off between its effect and
	// its record would run again on the queue's next owner.
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *drainTimeout)
	if err := remoting.Drain(drainCtx, idem, c); err != nil {
		log.Print(err)
	}
	cancel()

	doubled, err := doubledEntries(context.WithoutCancel(ctx), rdb, ledger)
	if err != nil {
		log.Print(err)
	}
	if doubled > 0 {
		log.Printf("%d orders were credited more than once", doubled)
	}
	stats := idem.Stats()
	fmt.Printf("delivered=%d suppressed=%d applied=%d\n", stats.Delivered, stats.Suppressed, applied.Load())
	if err := report(context.WithoutCancel(ctx)); err != nil {
		log.Print(err)
	}
	if *expect > 0 && (applied.Load() != *expect || doubled > 0) {
		os.Exit(1)
	}
}

// waitForTopic waits until the name server has a route for topic: a push
// consumer cannot start before. The sender's first message creates it.
func waitForTopic(ctx context.Context, namesrv, topic string) error {
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{namesrv})))
	if err != nil {
		return err
	}
	defer adm.Close()
	for {
		if qs, err := adm.FetchPublishMessageQueues(ctx, topic); err == nil && len(qs) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for topic %s: %w", topic, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitDone returns once settled says so, or after timeout.
func waitDone(ctx context.Context, timeout time.Duration, settled func() bool) {
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			log.Print("timed out")
			return
		case <-tick.C:
			if settled() {
				return
			}
		}
	}
}

// doubledEntries counts ledger entries credited more than once.
func doubledEntries(ctx context.Context, rdb *redis.Client, ledger string) (int, error) {
	counts, err := rdb.HVals(ctx, ledger).Result()
	if err != nil {
		return 0, fmt.Errorf("read ledger: %w", err)
	}
	doubled := 0
	for _, c := range counts {
		if c != "1" {
			doubled++
		}
	}
	return doubled, nil
}

// reachable reports whether something accepts connections at addr: a
// refused name server is reported as such at start, not as a missing
// route later.
func reachable(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
