package remoting_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// testGroup is the consumer group of the unit tests.
const testGroup = "group-a"

func msg(key string) *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: "M-" + key}
	m.Topic = "orders"
	m.Body = []byte("body of " + key)
	if key != "" {
		m.WithProperty(msgkey.Property, key)
	}
	return m
}

// counter is a handler with a visible side effect per key. Safe for
// concurrent use.
type counter struct {
	mu      sync.Mutex
	applied map[string]int
	fail    map[string]error
	panics  map[string]bool
}

func newCounter() *counter {
	return &counter{applied: map[string]int{}, fail: map[string]error{}, panics: map[string]bool{}}
}

func (c *counter) handle(_ context.Context, m *consumer.Message) error {
	k := msgkey.Of(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.panics[k] {
		panic("boom " + k)
	}
	if err := c.fail[k]; err != nil {
		return err
	}
	c.applied[k]++
	return nil
}

// count returns how often key was applied.
func (c *counter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied[key]
}

// newConsumer returns a Consumer of testGroup over store that logs into the
// buffer returned; opts come after those.
func newConsumer(t testing.TB, store dedupe.Store, opts ...consumer.Option) (*consumer.Consumer, *testkit.Buffer) {
	t.Helper()
	logs := new(testkit.Buffer)
	opts = append([]consumer.Option{consumer.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}, opts...)
	c, err := consumer.New(store, testGroup, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, logs
}

// setup returns a counter, the Concurrently callback that runs it, the
// Consumer's stats and its logs.
func setup(t *testing.T, store dedupe.Store, opts ...consumer.Option) (*counter, remoting.Callback, *consumer.Stats, *testkit.Buffer) {
	t.Helper()
	c, logs := newConsumer(t, store, opts...)
	cnt := newCounter()
	return cnt, remoting.Concurrently(c, cnt.handle), c.Stats(), logs
}

// hold claims key for testGroup in store for lease, as another consumer
// would, and returns its ticket.
func hold(t testing.TB, store dedupe.Store, key string, lease time.Duration) dedupe.Ticket {
	t.Helper()
	ref := dedupe.Ref{Group: testGroup, Key: key}
	res, err := testkit.Claim(context.Background(), store, dedupe.Item{Ref: ref}, lease)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("claim %s = %v, %v; want acquired", key, res.Outcome, err)
	}
	return dedupe.Ticket{Ref: ref, Token: res.Token}
}

// orderly is remoting.Orderly with the default options, in the shape of
// remoting.Concurrently.
func orderly(c *consumer.Consumer, h consumer.Handler) remoting.Callback {
	return remoting.Orderly(c, h)
}

// noWait is a busy wait short enough that a busy key is handed back at
// once, unless it must be waited for.
var noWait = consumer.WithBusyWait(time.Millisecond)

// noStoreWait is a store-down wait short enough that a message whose claim
// failed is handed back at once, unless it must wait.
var noStoreWait = consumer.WithStoreDownWait(time.Nanosecond)

func TestDuplicateIsSuppressed(t *testing.T) {
	c, cb, stats, _ := setup(t, memdedupe.New(memdedupe.Config{}))
	for range 3 {
		if res, err := cb(context.Background(), msg("k1")); res != rmq.ConsumeSuccess || err != nil {
			t.Fatalf("got %v, %v; want success", res, err)
		}
	}
	if c.count("k1") != 1 {
		t.Fatalf("applied %d times, want 1", c.count("k1"))
	}
	if got := stats.Suppressed.Load(); got != 2 {
		t.Fatalf("suppressed %d, want 2", got)
	}
	if got := stats.Delivered.Load(); got != 3 {
		t.Fatalf("delivered %d, want 3", got)
	}
}

func TestGroupsAreSeparate(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	c := newCounter()
	for _, g := range []string{"group-a", "group-b"} {
		cc, err := consumer.New(store, g)
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := remoting.Concurrently(cc, c.handle)(context.Background(), msg("k")); res != rmq.ConsumeSuccess {
			t.Fatalf("group %s: %v", g, res)
		}
	}
	if c.count("k") != 2 {
		t.Fatalf("applied %d times across two groups, want 2", c.count("k"))
	}
}

func TestNamespacesAreSeparate(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	c := newCounter()
	for _, ns := range []string{"app-1", "app-2", "app-1"} {
		cc, err := consumer.New(store, testGroup, consumer.WithNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := remoting.Concurrently(cc, c.handle)(context.Background(), msg("k")); res != rmq.ConsumeSuccess {
			t.Fatalf("namespace %s: %v", ns, res)
		}
	}
	if c.count("k") != 2 {
		t.Fatalf("applied %d times across two namespaces, want 2", c.count("k"))
	}
}

func TestFailureIsRetriedNotLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(*counter)
	}{
		{"error", func(c *counter) { c.fail["k"] = errors.New("db down") }},
		{"panic", func(c *counter) { c.panics["k"] = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cb, stats, _ := setup(t, memdedupe.New(memdedupe.Config{}))
			tc.spoil(c)
			res, err := cb(context.Background(), msg("k"))
			if res != rmq.ConsumeRetryLater || err == nil {
				t.Fatalf("got %v, %v; want retry later with the error", res, err)
			}
			var p *consumer.PanicError
			if tc.name == "panic" && (!errors.As(err, &p) || p.Value != "boom k" || len(p.Stack) == 0) {
				t.Fatalf("error %v is not a PanicError with the value and a stack", err)
			}
			// The claim was released, so the redelivery runs at once.
			c.fail, c.panics = map[string]error{}, map[string]bool{}
			if res, err := cb(context.Background(), msg("k")); res != rmq.ConsumeSuccess || err != nil {
				t.Fatalf("redelivery: %v, %v", res, err)
			}
			if c.count("k") != 1 || stats.Failed.Load() != 1 {
				t.Fatalf("applied %d failed %d, want 1 and 1", c.count("k"), stats.Failed.Load())
			}
		})
	}
}

func TestMessageWithoutKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []consumer.Option
		wantRes rmq.ConsumeResult
		applied int
	}{
		{"strict", nil, rmq.ConsumeRetryLater, 0},
		{"uniq key fallback", []consumer.Option{consumer.WithKeyFallback(remoting.UniqKey, consumer.MsgID)}, rmq.ConsumeSuccess, 1},
		{"msg id fallback", []consumer.Option{consumer.WithKeyFallback(consumer.MsgID)}, rmq.ConsumeSuccess, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cb, stats, logs := setup(t, memdedupe.New(memdedupe.Config{}), tc.opts...)
			m := msg("")
			m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, "UNIQ1")
			res, err := cb(context.Background(), m)
			if res != tc.wantRes {
				t.Fatalf("got %v (%v), want %v", res, err, tc.wantRes)
			}
			if tc.wantRes == rmq.ConsumeRetryLater {
				if !errors.Is(err, consumer.ErrNoKey) || stats.NoKey.Load() != 1 || stats.InvalidKey.Load() != 1 ||
					!strings.Contains(logs.String(), "message key cannot be deduplicated") {
					t.Fatalf("err %v, NoKey %d, InvalidKey %d, logs %q", err, stats.NoKey.Load(), stats.InvalidKey.Load(), logs)
				}
			}
			if got := c.count(""); got != tc.applied {
				t.Fatalf("applied %d, want %d", got, tc.applied)
			}
		})
	}
}

func TestInvalidKeyIsRetried(t *testing.T) {
	c, cb, stats, _ := setup(t, memdedupe.New(memdedupe.Config{}))
	res, err := cb(context.Background(), msg(strings.Repeat("x", msgkey.MaxLen+1)))
	if res != rmq.ConsumeRetryLater || !errors.Is(err, msgkey.ErrInvalid) || !errors.Is(err, msgkey.ErrInvalid) {
		t.Fatalf("got %v, %v; want retry later with msgkey.ErrInvalid", res, err)
	}
	// It has a key, one that cannot be stored.
	if stats.InvalidKey.Load() != 1 || stats.NoKey.Load() != 0 || stats.StoreDown.Load() != 0 {
		t.Fatalf("InvalidKey %d NoKey %d StoreDown %d, want 1, 0 and 0", stats.InvalidKey.Load(), stats.NoKey.Load(), stats.StoreDown.Load())
	}
	if len(c.applied) != 0 {
		t.Fatal("handler ran for a key that cannot be deduplicated")
	}
}

func TestStoreDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    testkit.Fault
		opts     []consumer.Option
		wantRes  rmq.ConsumeResult
		applied  int
		thenHeal int // applied after healing and redelivering
	}{
		{"claim fails closed", testkit.Fault{Ops: testkit.OpClaim}, nil, rmq.ConsumeRetryLater, 0, 1},
		{"claim fails open", testkit.Fault{Ops: testkit.OpClaim},
			[]consumer.Option{consumer.WithGuard(dedupe.GuardConfig{FailOpen: true})}, rmq.ConsumeSuccess, 1, 2},
		// The effect ran but was not recorded: acknowledging is the only
		// answer that does not run it again at once. The redelivery finds
		// the key busy until its lease ends, and is handed back.
		{"complete fails", testkit.Fault{Ops: testkit.OpComplete}, nil, rmq.ConsumeSuccess, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			c, cb, _, _ := setup(t, fs, append(tc.opts, noWait, noStoreWait)...)
			fs.Inject(tc.fault)
			if res, err := cb(context.Background(), msg("k")); res != tc.wantRes {
				t.Fatalf("got %v (%v), want %v", res, err, tc.wantRes)
			}
			if c.count("k") != tc.applied {
				t.Fatalf("applied %d, want %d", c.count("k"), tc.applied)
			}
			fs.Heal()
			cb(context.Background(), msg("k"))
			if c.count("k") != tc.thenHeal {
				t.Fatalf("after healing: applied %d, want %d", c.count("k"), tc.thenHeal)
			}
		})
	}
}

// TestBusyIsRetriedAfterTheLease hands a key that another consumer holds
// back, once the busy wait is spent, at the first delay level that covers
// the holder's remaining lease, however often it was reconsumed before its
// last reconsume.
func TestBusyIsRetriedAfterTheLease(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	hold(t, store, "k", 90*time.Second)
	c, cb, stats, _ := setup(t, store, noWait)
	for _, reconsumed := range []int32{0, 2, 15} {
		cc := &primitive.ConsumeConcurrentlyContext{}
		ctx := primitive.WithConcurrentlyCtx(context.Background(), cc)
		m := msg("k")
		m.ReconsumeTimes = reconsumed
		res, err := cb(ctx, m)
		if res != rmq.ConsumeRetryLater || err == nil || !strings.Contains(err.Error(), "held by another consumer") || c.count("k") != 0 {
			t.Fatalf("got %v, %v, applied %d", res, err, c.count("k"))
		}
		// Level 6 is 2m, the first default level no shorter than 90s.
		if cc.DelayLevelWhenNextConsume != 6 {
			t.Errorf("reconsumed %d times: delay level %d, want 6", reconsumed, cc.DelayLevelWhenNextConsume)
		}
	}
	if stats.Busy.Load() != 3 {
		t.Fatalf("busy %d, want 3", stats.Busy.Load())
	}
}

func TestBatchRetriesOnlyWhatFailed(t *testing.T) {
	c, cb, _, _ := setup(t, memdedupe.New(memdedupe.Config{}))
	c.fail["b"] = errors.New("transient")
	if res, _ := cb(context.Background(), msg("a"), msg("b"), msg("c")); res != rmq.ConsumeRetryLater {
		t.Fatalf("got %v, want retry later", res)
	}
	delete(c.fail, "b")
	if res, err := cb(context.Background(), msg("a"), msg("b"), msg("c")); res != rmq.ConsumeSuccess {
		t.Fatalf("redelivery: %v %v", res, err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if c.count(k) != 1 {
			t.Fatalf("%s applied %d times, want 1", k, c.count(k))
		}
	}
}

func TestOrderlySuspendsInsteadOfSkipping(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []remoting.Option
		wantMS int
	}{
		{"Default", nil, 1000},
		{"Set", []remoting.Option{remoting.WithSuspend(1500 * time.Millisecond)}, 1500},
		{"Zero", []remoting.Option{remoting.WithSuspend(0)}, int(remoting.MinSuspend.Milliseconds())}, // never a tight loop
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc, _ := newConsumer(t, memdedupe.New(memdedupe.Config{}))
			c := newCounter()
			c.fail["k"] = errors.New("not yet")
			oc := primitive.NewConsumeOrderlyContext()
			ctx := primitive.WithOrderlyCtx(context.Background(), oc)
			cb := remoting.Orderly(cc, c.handle, tc.opts...)
			res, err := cb(ctx, msg("k"))
			if res != rmq.SuspendCurrentQueueAMoment || err == nil || oc.SuspendCurrentQueueTimeMillis != tc.wantMS {
				t.Fatalf("got %v, %v for %d ms, want SuspendCurrentQueueAMoment for %d ms", res, err, oc.SuspendCurrentQueueTimeMillis, tc.wantMS)
			}
			// The same message comes back and runs once.
			delete(c.fail, "k")
			for range 2 {
				if res, err := cb(ctx, msg("k")); res != rmq.ConsumeSuccess {
					t.Fatalf("redelivery: %v, %v", res, err)
				}
			}
			if c.count("k") != 1 {
				t.Fatalf("applied %d times, want 1", c.count("k"))
			}
		})
	}
}

func TestOrderlyRecoversPanics(t *testing.T) {
	cc, _ := newConsumer(t, memdedupe.New(memdedupe.Config{}))
	c := newCounter()
	c.panics["k"] = true
	res, err := remoting.Orderly(cc, c.handle)(context.Background(), msg("k"))
	var p *consumer.PanicError
	if res != rmq.SuspendCurrentQueueAMoment || !errors.As(err, &p) {
		t.Fatalf("got %v, %v; want a suspension with a PanicError", res, err)
	}
}

func TestStatsAreTheGivenOnes(t *testing.T) {
	stats := new(consumer.Stats)
	c, _ := newConsumer(t, memdedupe.New(memdedupe.Config{}), consumer.WithStats(stats))
	if c.Stats() != stats {
		t.Fatal("Stats() is not the Stats given with WithStats")
	}
	remoting.Concurrently(c, newCounter().handle)(context.Background(), msg("k"))
	if stats.Completed.Load() != 1 {
		t.Fatalf("completed %d, want 1", stats.Completed.Load())
	}
}
