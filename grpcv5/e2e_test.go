package grpcv5_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/redisdedupe"
	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testenv/remotingread"
	"github.com/idemq/idemq/msgkey"
)

// inChild runs t in a child process, against the test proxy and Redis,
// unless this is that child, and reports whether it is: the child
// tolerates the gRPC client's own data races (internal/racechild). The
// tests it runs so run in parallel with each other: each has a topic and
// a group of its own, and spends most of its time waiting on the proxy's
// timers (invisible durations, retry delays, rebalances).
func inChild(t *testing.T) bool {
	t.Helper()
	t.Parallel()
	ep := testenv.RocketMQ5(t)
	return racechild.Test(t, "IDEMQ_ROCKETMQ5_NAMESRV="+ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY="+ep.Proxy,
		"IDEMQ_REDIS_ADDR="+testenv.Redis(t))
}

// oneSecond are the test group's retry delays: testenv creates groups with
// a customized retry policy of 1s per attempt.
var oneSecond = slices.Repeat([]time.Duration{time.Second}, 18)

// fixture is one end-to-end run: a RocketMQ 5 proxy, a topic and a group
// of its own (with retryMaxTimes as given), and a Redis dedupe store.
type fixture struct {
	t            *testing.T
	ep           testenv.RocketMQ5Endpoints
	run          string
	topic, group string
	store        *redisdedupe.Store
}

func newFixture(t *testing.T, name string, retryMaxTimes int) *fixture {
	t.Helper()
	ep := testenv.RocketMQ5(t)
	f := &fixture{t: t, ep: ep, run: fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())}
	f.topic, f.group = "g5-"+f.run, "g5-group-"+f.run
	testenv.RocketMQ5Topic(t, f.topic, 4)
	testenv.RocketMQGroup(t, ep.NameServer, f.group, retryMaxTimes)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { rdb.Close() })
	store, err := redisdedupe.New(rdb, redisdedupe.Config{Prefix: "g5:" + f.run + ":"})
	if err != nil {
		t.Fatal(err)
	}
	f.store = store
	return f
}

// patient builds the clients with 10 s request timeouts instead of 3 s:
// under a whole test suite's load a just started proxy may take longer to
// answer a route query.
func patient(c *golang.Config, opts ...golang.ClientOption) (golang.Client, error) {
	return golang.NewClient(c, append(opts, golang.WithQueryRouteTimeout(10*time.Second))...)
}

func (f *fixture) config(group string) *golang.Config {
	return &golang.Config{Endpoint: f.ep.Proxy, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// consumer is a Consumer of the run's group, counting into its own Stats.
func (f *fixture) consumer(opts ...consumer.Option) *consumer.Consumer {
	f.t.Helper()
	opts = append([]consumer.Option{
		consumer.WithDelayLevels(oneSecond...),
		consumer.WithGuard(dedupe.GuardConfig{Retention: 10 * time.Minute}),
		consumer.WithLogger(slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}, opts...)
	c, err := consumer.New(f.store, f.group, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// simpleConsumer is a started SimpleConsumer of the run's group on its
// topic, stopped when the test ends.
func (f *fixture) simpleConsumer() golang.SimpleConsumer {
	f.t.Helper()
	sc, err := golang.NewSimpleConsumer(f.config(f.group),
		golang.WithClientFuncForSimpleConsumer(patient),
		golang.WithSimpleAwaitDuration(5*time.Second),
		golang.WithSimpleSubscriptionExpressions(map[string]*golang.FilterExpression{f.topic: golang.SUB_ALL}))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := sc.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { sc.GracefulStop() })
	return sc
}

// receive runs a Receiver of sc through c until the test ends (drained
// then, before sc stops), with the given handler and settings.
func (f *fixture) receive(c *consumer.Consumer, sc golang.SimpleConsumer, h consumer.Handler, cfg grpcv5.SimpleConfig) *grpcv5.Receiver {
	f.t.Helper()
	r, err := grpcv5.Simple(c, sc, h, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	f.t.Cleanup(func() {
		if err := r.Close(); err != nil {
			f.t.Errorf("drain: %v", err)
		}
		<-done
	})
	return r
}

// producer is a started 5.x producer of the run's topic.
func (f *fixture) producer() golang.Producer {
	f.t.Helper()
	p, err := golang.NewProducer(f.config(""), golang.WithClientFunc(patient), golang.WithTopics(f.topic))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { p.GracefulStop() })
	return p
}

// send sends a message with key to the run's topic, carrying its key as
// the adapter's Producer stamps it.
func (f *fixture) send(p golang.Producer, key string) {
	f.t.Helper()
	m := &golang.Message{Topic: f.topic, Body: []byte("order " + key)}
	m.AddProperty(msgkey.Property, key)
	m.SetKeys(key)
	if _, err := p.Send(f.t.Context(), m); err != nil {
		f.t.Fatalf("send %s: %v", key, err)
	}
}

// watchDLQ counts the keys of the messages the run's group dead-lettered,
// read by a remoting push consumer of a group of its own.
func (f *fixture) watchDLQ() *remotingread.DeadLetters {
	f.t.Helper()
	return remotingread.WatchDeadLetters(f.t, f.ep.NameServer, f.group, "g5-dlq-"+f.run)
}

// ledger is the effect under test: how often each key was applied.
type ledger struct {
	mu      sync.Mutex
	applied map[string]int
}

func newLedger() *ledger { return &ledger{applied: map[string]int{}} }

func (l *ledger) handle(_ context.Context, m *consumer.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied[msgkey.Of(m)]++
	return nil
}

func (l *ledger) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.applied)
}

// settle waits until every key of keys is applied, then for a quiet second
// more so that a late duplicate shows, and checks that each was applied
// exactly once and none dead-lettered.
func (f *fixture) settle(l *ledger, keys []string, dlq *remotingread.DeadLetters, timeout time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := l.snapshot()
		n := 0
		for _, k := range keys {
			if got[k] > 0 {
				n++
			}
		}
		if n == len(keys) {
			break
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("after %v, %d of %d keys applied; dead-lettered: %v", timeout, n, len(keys), dlq.Keys())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	got := l.snapshot()
	for _, k := range keys {
		if got[k] != 1 {
			f.t.Errorf("key %s applied %d times, want 1", k, got[k])
		}
	}
	if len(got) != len(keys) {
		f.t.Errorf("applied %d keys, want %d", len(got), len(keys))
	}
	if dead := dlq.Keys(); len(dead) > 0 {
		f.t.Errorf("dead-lettered: %v", dead)
	}
}

// attempts is a SimpleConsumer that records the delivery attempt of each
// message it receives.
type attempts struct {
	golang.SimpleConsumer
	mu   sync.Mutex
	seen []int32
}

func (a *attempts) Receive(ctx context.Context, n int32, d time.Duration) ([]*golang.MessageView, error) {
	vs, err := a.SimpleConsumer.Receive(ctx, n, d)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range vs {
		a.seen = append(a.seen, v.GetDeliveryAttempt())
	}
	return vs, err
}

func (a *attempts) list() []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// TestSimpleBusyKeyEndToEnd sends one key twice. Receiver A takes the
// first copy into a handler that runs 12 s, longer than the 10 s invisible
// duration; receiver B, of the same group, gets the second copy while A
// runs: it waits in process, its message kept invisible, and once A
// completes the key it suppresses the copy. The group allows no retry
// (retryMaxTimes 0), so a delivery attempt spent on either copy would
// dead-letter it: none is, every delivery is a first attempt, and the key
// is applied once. (In a child process: see inChild.)
func TestSimpleBusyKeyEndToEnd(t *testing.T) {
	if !inChild(t) {
		return
	}
	const work = 12 * time.Second
	begin := time.Now()
	f := newFixture(t, "busy", 0)
	dlq := f.watchDLQ()
	key := f.run + "-busy"
	l := newLedger()
	started := make(chan struct{})
	var once sync.Once
	slow := func(ctx context.Context, m *consumer.Message) error {
		once.Do(func() { close(started) })
		select {
		case <-time.After(work):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return l.handle(ctx, m)
	}
	cfg := grpcv5.SimpleConfig{Workers: 1, BatchSize: 1, InvisibleDuration: 10 * time.Second}
	a, b := f.consumer(), f.consumer()
	recA := &attempts{SimpleConsumer: f.simpleConsumer()}
	f.receive(a, recA, slow, cfg)
	p := f.producer()
	f.send(p, key)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("receiver A got nothing")
	}
	heldAt := time.Now()
	f.send(p, key)
	recB := &attempts{SimpleConsumer: f.simpleConsumer()}
	f.receive(b, recB, l.handle, cfg)
	deadline := time.Now().Add(work + 30*time.Second)
	for b.Stats().Suppressed == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("B suppressed nothing: delivered %d, waited %d; A completed %d", b.Stats().Delivered, b.Stats().Waited, a.Stats().Completed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	suppressedAfter := time.Since(heldAt)
	f.settle(l, []string{key}, dlq, time.Second)
	t.Logf(racechild.Figure+"busy: B waited %v for A's key (A's handler %v, invisible duration %v); attempts seen by A %v, by B %v; B waited=%d busy=%d retried=%d; %v in all",
		suppressedAfter.Round(100*time.Millisecond), work, cfg.InvisibleDuration, recA.list(), recB.list(),
		b.Stats().Waited, b.Stats().Busy, b.Stats().Retried, time.Since(begin).Round(100*time.Millisecond))
	for _, at := range slices.Concat(recA.list(), recB.list()) {
		if at != 1 {
			t.Errorf("a delivery on attempt %d: an attempt was spent", at)
		}
	}
	if len(recB.list()) != 1 || b.Stats().Waited != 1 || b.Stats().Retried != 0 {
		t.Errorf("B received %v, waited %d, retried %d; want one first attempt, waited for, not retried", recB.list(), b.Stats().Waited, b.Stats().Retried)
	}
}
