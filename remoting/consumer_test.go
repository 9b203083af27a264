package remoting_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// The consumer core's own behaviour (every outcome, busy keys, batches,
// drains, store outages) is tested in package consumer on
// consumer.Consumer.Process; the adapters' behaviour against a broker in
// TestConformance (internal/adaptertest). What is left here is the
// adapters' own: how a callback answers the client for the verdicts, and
// how it describes the client's messages.

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

// callback is the function a rocketmq.PushConsumer subscribes with, as
// remoting.Concurrently and remoting.Orderly return it.
type callback = func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)

// failing is a handler that fails the keys that start with "fail", panics
// for "panic", and counts the others' runs in ran.
func failing(ran map[string]int) consumer.Handler {
	return func(_ context.Context, m *consumer.Message) error {
		k := msgkey.Of(m)
		switch {
		case k == "panic":
			panic("boom")
		case strings.HasPrefix(k, "fail"):
			return errors.New("declined " + k)
		}
		ran[k]++
		return nil
	}
}

// TestCallbacks checks how Concurrently and Orderly answer the client for
// a delivery: success when every message is acknowledged; else, for
// Concurrently, a retry at the highest delay level its busy keys ask for
// (the broker's back-off without one), and for Orderly a suspension of the
// queue for WithSuspend, the same message coming back.
func TestCallbacks(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		opts []remoting.Option
		// ok: success; level: Concurrently's delay level; suspend:
		// Orderly's suspension in ms, when not ok.
		ok      bool
		level   int
		suspend int
		panics  bool
	}{
		{name: "Fresh", keys: []string{"a", "b"}, ok: true},
		{name: "Failed", keys: []string{"a", "fail"}, suspend: 1000},
		{name: "Panic", keys: []string{"panic"}, suspend: 1000, panics: true},
		{name: "SuspendSet", keys: []string{"fail"}, opts: []remoting.Option{remoting.WithSuspend(1500 * time.Millisecond)}, suspend: 1500},
		// Never a tight loop.
		{name: "SuspendZero", keys: []string{"fail"}, opts: []remoting.Option{remoting.WithSuspend(0)}, suspend: 100},
		{name: "Busy", keys: []string{"a", "busy1h"}, level: 17},      // 1h
		{name: "ShortBusy", keys: []string{"busy90s", "a"}, level: 6}, // 2m
		{name: "Longest", keys: []string{"busy90s", "a", "busy1h"}, level: 17},
		{name: "BusyAndFailed", keys: []string{"busy90s", "fail"}, level: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memdedupe.New(memdedupe.Config{})
			for key, lease := range map[string]time.Duration{"busy1h": time.Hour, "busy90s": 90 * time.Second} {
				ref := dedupe.Ref{Group: testGroup, Key: key}
				if _, err := testkit.Claim(t.Context(), store, dedupe.Item{Ref: ref}, lease); err != nil {
					t.Fatal(err)
				}
			}
			c, err := consumer.New(store, testGroup, consumer.WithBusyWait(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			ran := map[string]int{}
			exts := make([]*primitive.MessageExt, len(tt.keys))
			for i, k := range tt.keys {
				exts[i] = msg(k)
			}
			cc := &primitive.ConsumeConcurrentlyContext{}
			res, err := remoting.Concurrently(c, failing(ran))(primitive.WithConcurrentlyCtx(context.Background(), cc), exts...)
			if want := map[bool]rmq.ConsumeResult{true: rmq.ConsumeSuccess, false: rmq.ConsumeRetryLater}[tt.ok]; res != want || (err == nil) != tt.ok || cc.DelayLevelWhenNextConsume != tt.level {
				t.Errorf("Concurrently = %v, %v at level %d; want %v at level %d", res, err, cc.DelayLevelWhenNextConsume, want, tt.level)
			}
			if tt.level > 0 {
				return // Orderly waits for busy keys
			}
			oc := primitive.NewConsumeOrderlyContext()
			cb := remoting.Orderly(c, failing(ran), tt.opts...)
			res, err = cb(primitive.WithOrderlyCtx(context.Background(), oc), exts...)
			want, suspend := rmq.SuspendCurrentQueueAMoment, tt.suspend
			if tt.ok {
				want, suspend = rmq.ConsumeSuccess, -1
			}
			var p *consumer.PanicError
			if res != want || oc.SuspendCurrentQueueTimeMillis != suspend || tt.panics != errors.As(err, &p) {
				t.Errorf("Orderly = %v, %v for %d ms; want %v for %d ms", res, err, oc.SuspendCurrentQueueTimeMillis, want, suspend)
			}
			// Each key ran once, by whichever callback came first.
			for k, n := range ran {
				if n != 1 {
					t.Errorf("%s applied %d times, want 1", k, n)
				}
			}
		})
	}
}

// TestMessages checks how a callback describes the client's messages to
// the Consumer, and UniqKey, the fallback key it reads.
func TestMessages(t *testing.T) {
	m := msg("")
	m.ReconsumeTimes = 3
	m.WithTag("paid")
	m.WithKeys([]string{"a", "b"})
	m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, "UNIQ1")
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), testGroup, consumer.WithKeyFallback(remoting.UniqKey))
	if err != nil {
		t.Fatal(err)
	}
	var got consumer.Message
	res, err := remoting.Concurrently(c, func(_ context.Context, cm *consumer.Message) error {
		got = *cm
		return nil
	})(context.Background(), m)
	if res != rmq.ConsumeSuccess || err != nil {
		t.Fatalf("callback = %v, %v; want success under the UNIQ_KEY", res, err)
	}
	if got.ID != "M-" || got.Topic != "orders" || got.Tag != "paid" || strings.Join(got.Keys, " ") != "a b" ||
		string(got.Body) != "body of " || got.Reconsumed != 3 || got.Raw != m || remoting.UniqKey(&got) != "UNIQ1" {
		t.Errorf("described as %+v", got)
	}
}

// stopper is a push consumer whose Shutdown fails with err.
type stopper struct {
	err   error
	stops int
}

func (s *stopper) Shutdown() error {
	s.stops++
	return s.err
}

// TestDrain checks what the callbacks answer once Drain has stopped the
// push consumer: a retry with no delay level and no suspension, which the
// stopped client does not act on; and that Drain reports a failed
// Shutdown.
func TestDrain(t *testing.T) {
	c, err := consumer.New(memdedupe.New(memdedupe.Config{}), testGroup)
	if err != nil {
		t.Fatal(err)
	}
	pc := &stopper{err: errors.New("offsets not persisted")}
	if err := remoting.Drain(context.Background(), c, pc); !errors.Is(err, pc.err) || pc.stops != 1 {
		t.Errorf("Drain = %v after %d shutdowns, want one that wraps %v", err, pc.stops, pc.err)
	}
	ran := map[string]int{}
	cc := &primitive.ConsumeConcurrentlyContext{}
	oc := primitive.NewConsumeOrderlyContext()
	ctx := primitive.WithOrderlyCtx(primitive.WithConcurrentlyCtx(context.Background(), cc), oc)
	for name, cb := range map[string]callback{"Concurrently": remoting.Concurrently(c, failing(ran)), "Orderly": remoting.Orderly(c, failing(ran))} {
		if res, err := cb(ctx, msg("late")); res != rmq.ConsumeRetryLater || !errors.Is(err, adapter.ErrDraining) {
			t.Errorf("%s after Drain = %v, %v; want retry later, draining", name, res, err)
		}
	}
	if len(ran) != 0 || cc.DelayLevelWhenNextConsume != 0 || oc.SuspendCurrentQueueTimeMillis != -1 {
		t.Errorf("ran %v, delay level %d, suspension %d ms; want nothing", ran, cc.DelayLevelWhenNextConsume, oc.SuspendCurrentQueueTimeMillis)
	}
}
