package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/producer"
)

func msg(key string) *primitive.MessageExt {
	m := &primitive.MessageExt{MsgId: "M-" + key}
	m.Topic = "orders"
	m.Body = []byte("body of " + key)
	if key != "" {
		m.WithProperty(producer.KeyProperty, key)
	}
	return m
}

// counter is a handler with a visible side effect per key.
type counter struct {
	applied map[string]int
	fail    map[string]error
	panics  map[string]bool
}

func newCounter() *counter {
	return &counter{applied: map[string]int{}, fail: map[string]error{}, panics: map[string]bool{}}
}

func (c *counter) handle(_ context.Context, m *primitive.MessageExt) error {
	k := producer.Key(&m.Message)
	if c.panics[k] {
		panic("boom " + k)
	}
	if err := c.fail[k]; err != nil {
		return err
	}
	c.applied[k]++
	return nil
}

func setup(t *testing.T, store dedupe.Store, opts ...consumer.Option) (*counter, consumer.Callback, *consumer.Stats, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	stats := new(consumer.Stats)
	opts = append([]consumer.Option{consumer.WithStats(stats), consumer.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}, opts...)
	dd, err := consumer.Dedupe(store, "group-a", opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := newCounter()
	return c, consumer.Concurrently(dd(c.handle)), stats, &logs
}

func TestDuplicateIsSuppressed(t *testing.T) {
	c, cb, stats, _ := setup(t, memdedupe.New(memdedupe.Config{}))
	for range 3 {
		if res, err := cb(context.Background(), msg("k1")); res != rmq.ConsumeSuccess || err != nil {
			t.Fatalf("got %v, %v; want success", res, err)
		}
	}
	if c.applied["k1"] != 1 {
		t.Fatalf("applied %d times, want 1", c.applied["k1"])
	}
	if got := stats.Suppressed.Load(); got != 2 {
		t.Fatalf("suppressed %d, want 2", got)
	}
}

func TestGroupsAreSeparate(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	c := newCounter()
	for _, g := range []string{"group-a", "group-b"} {
		dd, err := consumer.Dedupe(store, g)
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := consumer.Concurrently(dd(c.handle))(context.Background(), msg("k")); res != rmq.ConsumeSuccess {
			t.Fatalf("group %s: %v", g, res)
		}
	}
	if c.applied["k"] != 2 {
		t.Fatalf("applied %d times across two groups, want 2", c.applied["k"])
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
			var p *consumer.ErrPanic
			if tc.name == "panic" && !errors.As(err, &p) {
				t.Fatalf("error %v is not an ErrPanic", err)
			}
			// The claim was released, so the redelivery runs at once.
			c.fail, c.panics = map[string]error{}, map[string]bool{}
			if res, err := cb(context.Background(), msg("k")); res != rmq.ConsumeSuccess || err != nil {
				t.Fatalf("redelivery: %v, %v", res, err)
			}
			if c.applied["k"] != 1 || stats.Failed.Load() != 1 {
				t.Fatalf("applied %d failed %d, want 1 and 1", c.applied["k"], stats.Failed.Load())
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
		{"uniq key fallback", []consumer.Option{consumer.WithKeyFallback(consumer.UniqKey, consumer.MsgID)}, rmq.ConsumeSuccess, 1},
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
				if !errors.Is(err, consumer.ErrNoKey) || stats.NoKey.Load() != 1 || !strings.Contains(logs.String(), "without a usable key") {
					t.Fatalf("err %v, NoKey %d, logs %q", err, stats.NoKey.Load(), logs)
				}
			}
			total := 0
			for _, n := range c.applied {
				total += n
			}
			if total != tc.applied {
				t.Fatalf("applied %d, want %d", total, tc.applied)
			}
		})
	}
}

func TestInvalidKeyIsRetried(t *testing.T) {
	c, cb, stats, _ := setup(t, memdedupe.New(memdedupe.Config{}))
	res, err := cb(context.Background(), msg(strings.Repeat("x", 300)))
	if res != rmq.ConsumeRetryLater || !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Fatalf("got %v, %v; want retry later with ErrInvalidKey", res, err)
	}
	if stats.NoKey.Load() != 1 || stats.StoreErrors.Load() != 0 {
		t.Fatalf("NoKey %d StoreErrors %d, want 1 and 0", stats.NoKey.Load(), stats.StoreErrors.Load())
	}
	if len(c.applied) != 0 {
		t.Fatal("handler ran for a key that cannot be deduplicated")
	}
}

func TestStoreDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    dedupetest.Fault
		opts     []consumer.Option
		wantRes  rmq.ConsumeResult
		applied  int
		thenHeal int // applied after healing and redelivering
	}{
		{"claim fails closed", dedupetest.Fault{Ops: dedupetest.OpClaim}, nil, rmq.ConsumeRetryLater, 0, 1},
		{"claim fails open", dedupetest.Fault{Ops: dedupetest.OpClaim},
			[]consumer.Option{consumer.WithGuard(dedupe.GuardConfig{FailOpen: true})}, rmq.ConsumeSuccess, 1, 2},
		// The effect ran but was not recorded: acknowledging is the only
		// answer that does not run it again at once.
		{"complete fails", dedupetest.Fault{Ops: dedupetest.OpComplete}, nil, rmq.ConsumeSuccess, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := dedupetest.NewFaultStore(memdedupe.New(memdedupe.Config{}))
			c, cb, _, _ := setup(t, fs, tc.opts...)
			fs.Inject(tc.fault)
			if res, err := cb(context.Background(), msg("k")); res != tc.wantRes {
				t.Fatalf("got %v (%v), want %v", res, err, tc.wantRes)
			}
			if c.applied["k"] != tc.applied {
				t.Fatalf("applied %d, want %d", c.applied["k"], tc.applied)
			}
			fs.Heal()
			cb(context.Background(), msg("k"))
			if c.applied["k"] != tc.thenHeal {
				t.Fatalf("after healing: applied %d, want %d", c.applied["k"], tc.thenHeal)
			}
		})
	}
}

func TestInFlightIsRetriedLater(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	if _, err := store.Claim(context.Background(), dedupe.ClaimRequest{
		Ref: dedupe.Ref{Group: "group-a", Key: "k"}, Lease: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	c, cb, stats, _ := setup(t, store)
	for _, tc := range []struct {
		reconsumed int32
		wantLevel  int
	}{{0, 1}, {2, 3}, {30, 18}} {
		cc := &primitive.ConsumeConcurrentlyContext{}
		ctx := primitive.WithConcurrentlyCtx(context.Background(), cc)
		m := msg("k")
		m.ReconsumeTimes = tc.reconsumed
		res, err := cb(ctx, m)
		if res != rmq.ConsumeRetryLater || !errors.Is(err, dedupe.ErrInFlight) || c.applied["k"] != 0 {
			t.Fatalf("got %v, %v, applied %d", res, err, c.applied["k"])
		}
		if cc.DelayLevelWhenNextConsume != tc.wantLevel {
			t.Errorf("reconsumed %d times: delay level %d, want %d", tc.reconsumed, cc.DelayLevelWhenNextConsume, tc.wantLevel)
		}
	}
	if stats.InFlight.Load() != 3 {
		t.Fatalf("in flight %d, want 3", stats.InFlight.Load())
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
		if c.applied[k] != 1 {
			t.Fatalf("%s applied %d times, want 1", k, c.applied[k])
		}
	}
}

func TestOrderlySuspendsInsteadOfSkipping(t *testing.T) {
	dd, err := consumer.Dedupe(memdedupe.New(memdedupe.Config{}), "group-a", consumer.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		suspend time.Duration
		wantMS  int
	}{
		{1500 * time.Millisecond, 1500},
		{0, int(consumer.MinOrderlySuspend.Milliseconds())}, // never a tight loop
	} {
		c := newCounter()
		c.fail["k"] = errors.New("not yet")
		oc := primitive.NewConsumeOrderlyContext()
		ctx := primitive.WithOrderlyCtx(context.Background(), oc)
		res, _ := consumer.Orderly(dd(c.handle), tc.suspend)(ctx, msg("k"))
		if res != rmq.SuspendCurrentQueueAMoment || oc.SuspendCurrentQueueTimeMillis != tc.wantMS {
			t.Fatalf("suspend %v: got %v for %d ms, want SuspendCurrentQueueAMoment for %d ms", tc.suspend, res, oc.SuspendCurrentQueueTimeMillis, tc.wantMS)
		}
	}
}

func TestDedupeRejectsBadGroup(t *testing.T) {
	if _, err := consumer.Dedupe(memdedupe.New(memdedupe.Config{}), ""); !errors.Is(err, dedupe.ErrInvalidKey) {
		t.Fatalf("empty group: %v, want ErrInvalidKey", err)
	}
}
