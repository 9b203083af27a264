package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// ledger is the side effect under test: how often each key was applied.
type ledger struct {
	mu       sync.Mutex
	applied  map[string]int
	failOnce map[string]bool
}

func (l *ledger) handle(ctx context.Context, m *consumer.Message) error {
	key := msgkey.Of(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failOnce[key] {
		delete(l.failOnce, key)
		// Redeliver after 1s rather than the broker's default 10s.
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			cc.DelayLevelWhenNextConsume = 1
		}
		return errors.New("transient failure")
	}
	l.applied[key]++
	return nil
}

func (l *ledger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.applied))
	for k, v := range l.applied {
		out[k] = v
	}
	return out
}

// subscriber returns the Consumer of one push consumer in group, and the
// function that turns a handler into the callback the
// push consumer subscribes with.
type subscriber func(group string) (*consumer.Consumer, func(consumer.Handler) callback, error)

// broker is a RocketMQ server as the remoting client sees it: a name
// server, how to create a topic on it, and the variables that name it to
// a child process.
type broker struct {
	name       string
	nameServer func(testing.TB) string
	topic      func(tb testing.TB, topic string, queues int)
	env        func(testing.TB) []string
}

var (
	broker4 = broker{"4.x", testenv.RocketMQ, testenv.RocketMQTopic,
		func(tb testing.TB) []string { return []string{"IDEMQ_ROCKETMQ_NAMESRV=" + testenv.RocketMQ(tb)} }}
	broker5 = broker{"5.x", func(tb testing.TB) string { return testenv.RocketMQ5(tb).NameServer }, testenv.RocketMQ5Topic,
		func(tb testing.TB) []string {
			ep := testenv.RocketMQ5(tb)
			return []string{"IDEMQ_ROCKETMQ5_NAMESRV=" + ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY=" + ep.Proxy}
		}}
)

// inChild runs t in a child process, against b, the test Redis and env,
// unless this is that child, and reports whether it is: the child
// tolerates the remoting client's own data races, such as its Shutdown
// against a rebalance (internal/racechild), and fails on any other. Every
// test that starts and shuts down a client runs so; its log lines are
// racechild.Figure lines.
func inChild(t *testing.T, b broker, env ...string) bool {
	t.Helper()
	return racechild.Test(t, append(append(b.env(t), "IDEMQ_REDIS_ADDR="+testenv.Redis(t)), env...)...)
}

// newRedisStore returns a store on the test Redis whose keys start with
// prefix, and its client, closed when tb ends.
func newRedisStore(tb testing.TB, prefix string) (*redisdedupe.Store, *redis.Client) {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(tb)})
	tb.Cleanup(func() { rdb.Close() })
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: prefix})
	if err != nil {
		tb.Fatal(err)
	}
	return store, rdb
}

// endToEnd sends N distinct messages and re-sends M of them to b; two
// consumers in one group, with the callbacks that adapt returns, apply
// every message exactly once, including messages whose
// first attempt failed. The consumers stop with Drain.
func endToEnd(t *testing.T, b broker, adapt subscriber) {
	const n, resent, failing = 60, 20, 5
	ns := b.nameServer(t)
	version, err := testenv.RocketMQBrokerVersion(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf(racechild.Figure+"Apache RocketMQ broker %s at name server %s", version, ns)
	run := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	topic, group := "e2e-"+run, "e2e-group-"+run
	b.topic(t, topic, 4)
	// The client looks up the retry topic's route at start and then only
	// every 30s; creating it now lets failed messages come back in ~1s.
	b.topic(t, "%RETRY%"+group, 1)

	l := &ledger{applied: map[string]int{}, failOnce: map[string]bool{}}
	rp, err := rocketmq.NewProducer(producerOptions(ns, "e2e-producer-"+run)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rp.Shutdown() })
	p, err := remoting.NewProducer(rp, testkit.Keys(t, 3))
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	msgs := make([]*primitive.Message, n)
	for i := range msgs {
		msgs[i] = primitive.NewMessage(topic, fmt.Appendf(nil, "order %d", i))
		if err := p.Stamp(ctx, msgs[i]); err != nil {
			t.Fatal(err)
		}
		if i%(n/failing) == 1 {
			l.mu.Lock()
			l.failOnce[msgkey.Of(msgs[i])] = true
			l.mu.Unlock()
		}
	}
	// Sent before the consumers start, so that their first pulls find
	// whole batches.
	for _, m := range append(msgs, msgs[:resent]...) {
		if _, err := p.SendSync(ctx, m); err != nil {
			t.Fatalf("send %s: %v", msgkey.Of(m), err)
		}
	}

	var firsts atomic.Int64 // deliveries other than retries; some twice after a rebalance
	stats := make([]func() consumer.Stats, 2)
	for i := range stats {
		cc, wrap, err := adapt(group)
		if err != nil {
			t.Fatal(err)
		}
		stats[i] = cc.Stats
		cb := wrap(l.handle)
		c, err := rocketmq.NewPushConsumer(
			rmq.WithNsResolver(primitive.NewPassthroughResolver([]string{ns})),
			rmq.WithGroupName(group),
			rmq.WithInstance(fmt.Sprintf("e2e-%s-%d", run, i)),
			rmq.WithConsumeFromWhere(rmq.ConsumeFromFirstOffset))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Subscribe(topic, rmq.MessageSelector{}, func(ctx context.Context, ms ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
			for _, m := range ms {
				if m.ReconsumeTimes == 0 {
					firsts.Add(1)
				}
			}
			return cb(ctx, ms...)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		// Drain rather than Shutdown, as a deployment would; LIFO, so
		// before the store closes.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := remoting.Drain(ctx, cc, c); err != nil {
				t.Errorf("drain consumer %d: %v", i, err)
			}
		})
	}

	total := func(f func(consumer.Stats) int64) (sum int64) {
		for _, s := range stats {
			sum += f(s())
		}
		return sum
	}
	suppressed := func(s consumer.Stats) int64 { return s.Suppressed }
	deadline := time.Now().Add(90 * time.Second)
	// Every stored copy delivered, every key applied, every re-send
	// suppressed (a redelivered batch suppresses more than the re-sends).
	for firsts.Load() < n+resent || len(l.snapshot()) < n || total(suppressed) < resent {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: delivered %d of %d copies, applied %d of %d keys, suppressed %d of %d re-sends",
				firsts.Load(), n+resent, len(l.snapshot()), n, total(suppressed), resent)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // let a stray duplicate arrive, if any

	got := l.snapshot()
	for _, m := range msgs {
		if k := msgkey.Of(m); got[k] != 1 {
			t.Errorf("key %s applied %d times, want 1", k, got[k])
		}
	}
	if len(got) != n {
		t.Errorf("applied %d distinct keys, want %d", len(got), n)
	}
	t.Logf(racechild.Figure+"delivered=%d suppressed=%d failed=%d busy=%d waited=%d per consumer: %d/%d",
		total(func(s consumer.Stats) int64 { return s.Delivered }), total(suppressed),
		total(func(s consumer.Stats) int64 { return s.Failed }),
		total(func(s consumer.Stats) int64 { return s.Busy }),
		total(func(s consumer.Stats) int64 { return s.Waited }),
		stats[0]().Completed, stats[1]().Completed)
	if f := total(func(s consumer.Stats) int64 { return s.Failed }); f != failing {
		t.Errorf("failed %d times, want %d (one per failing key)", f, failing)
	}
}
