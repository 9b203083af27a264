package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// testGroup is the consumer group of the tests.
const testGroup = "group-a"

// message is a delivery of a message with key (none if ""), as an adapter
// describes it.
func message(id, key string, reconsumed int32) consumer.Message {
	m := consumer.Message{ID: id, Topic: "orders", Body: []byte("body of " + key), Properties: map[string]string{}, Reconsumed: reconsumed, Raw: id}
	if key != "" {
		m.Properties[msgkey.Property] = key
	}
	return m
}

// hold claims key for testGroup in store for lease, as another consumer
// would.
func hold(t *testing.T, store dedupe.Store, key string, lease time.Duration) dedupe.Ticket {
	t.Helper()
	ref := dedupe.Ref{Group: testGroup, Key: key}
	res, err := testkit.Claim(context.Background(), store, dedupe.Item{Ref: ref}, lease)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("claim %s = %v, %v; want acquired", key, res.Outcome, err)
	}
	return dedupe.Ticket{Ref: ref, Token: res.Token}
}

func newConsumer(t *testing.T, store dedupe.Store, opts ...consumer.Option) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(store, testGroup, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logged returns a Consumer of testGroup over store that logs into the
// Logs returned; opts come after that.
func logged(t *testing.T, store dedupe.Store, opts ...consumer.Option) (*consumer.Consumer, *testkit.Logs) {
	t.Helper()
	logs := new(testkit.Logs)
	return newConsumer(t, store, append([]consumer.Option{consumer.WithLogger(slog.New(logs))}, opts...)...), logs
}

// msg is a first delivery of a message with key (none if ""), id M-key.
func msg(key string) consumer.Message { return message("M-"+key, key, 0) }

// msgs are first deliveries of messages with keys.
func msgs(keys ...string) []consumer.Message {
	ms := make([]consumer.Message, len(keys))
	for i, k := range keys {
		ms[i] = msg(k)
	}
	return ms
}

// process delivers ms to c together, for h, as a client that does not
// keep messages in hand (Waiting{}).
func process(c *consumer.Consumer, h consumer.Handler, ms ...consumer.Message) []adapter.Verdict {
	return adapter.Process(context.Background(), c, ms, h, adapter.Waiting{}, nil)
}

// acked reports whether every verdict of vs is Ack.
func acked(vs []adapter.Verdict) bool {
	return !slices.ContainsFunc(vs, func(v adapter.Verdict) bool { return v.Action != adapter.Ack })
}

// errOf joins the errors of vs, as an adapter's answer for them does.
func errOf(vs []adapter.Verdict) error {
	var errs []error
	for _, v := range vs {
		errs = append(errs, v.Err)
	}
	return errors.Join(errs...)
}

// ledger is a handler that counts its runs per key and fails, or panics
// in, the keys set to: the effect under test. Safe for concurrent use.
type ledger struct {
	mu     sync.Mutex
	n      map[string]int
	fail   map[string]error
	panics map[string]bool
}

func (l *ledger) handle(_ context.Context, m *consumer.Message) error {
	k := msgkey.Of(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.panics[k] {
		panic("boom " + k)
	}
	if err := l.fail[k]; err != nil {
		return err
	}
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[k]++
	return nil
}

// failing makes key fail with err (nil: succeed again).
func (l *ledger) failing(key string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail == nil {
		l.fail = map[string]error{}
	}
	l.fail[key] = err
}

// panicking makes key panic, or no longer.
func (l *ledger) panicking(key string, p bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.panics == nil {
		l.panics = map[string]bool{}
	}
	l.panics[key] = p
}

func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

// keys counts the keys applied.
func (l *ledger) keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.n)
}

// checkTotals fails unless every delivered message was counted once among
// the terminal counters.
func checkTotals(t *testing.T, s consumer.Stats) {
	t.Helper()
	sum := s.Completed + s.Suppressed + s.Failed + s.Busy + s.Reused + s.StoreDown +
		s.InvalidKey + s.LeaseLost + s.Unrecorded + s.Unguarded + s.Canceled
	if d := s.Delivered; sum != d {
		t.Errorf("delivered %d messages, counted %d among the outcomes", d, sum)
	}
}

// TestProcessKeyFallback: a message without a key is run under the first
// fallback that names one.
func TestProcessKeyFallback(t *testing.T) {
	c := newConsumer(t, memdedupe.New(memdedupe.Config{}),
		consumer.WithKeyFallback(func(*consumer.Message) string { return "" }, func(m *consumer.Message) string { return m.ID }))
	ran := 0
	h := func(context.Context, *consumer.Message) error { ran++; return nil }
	for range 2 {
		if v := adapter.Process(context.Background(), c, []consumer.Message{message("m1", "", 0)}, h, adapter.Waiting{}, nil); v[0].Action != adapter.Ack {
			t.Fatalf("verdict %+v, want Ack", v[0])
		}
	}
	if ran != 1 || c.Stats().Suppressed != 1 {
		t.Errorf("ran %d, suppressed %d; want 1 and 1: the id is the key", ran, c.Stats().Suppressed)
	}
}

// TestProcessWaitingAlways: a client that keeps the message in hand waits
// for a busy key past the busy wait, is asked to extend the message's
// invisibility meanwhile, and runs it once the holder releases the key.
func TestProcessWaitingAlways(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	ticket := hold(t, store, "k", time.Minute)
	c := newConsumer(t, store, consumer.WithBusyWait(time.Millisecond))
	var (
		mu      sync.Mutex
		extends []time.Duration
	)
	w := adapter.Waiting{Always: true, Extend: func(i int, lease time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if i == 0 {
			extends = append(extends, lease)
		}
		if len(extends) == 3 {
			testkit.Release(context.Background(), store, ticket)
		}
	}}
	ran := 0
	vs := adapter.Process(context.Background(), c, []consumer.Message{message("m1", "k", 0)},
		func(context.Context, *consumer.Message) error { ran++; return nil }, w, nil)
	if vs[0].Action != adapter.Ack || ran != 1 {
		t.Fatalf("verdict %+v, ran %d; want Ack after the holder released", vs[0], ran)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(extends) < 3 || extends[0] <= 0 || extends[0] > time.Minute {
		t.Errorf("extended %v; want each wait announced with the holder's remaining lease", extends)
	}
}

// TestNewRejects checks that New refuses settings that cannot work.
func TestNewRejects(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	tests := []struct {
		name  string
		store dedupe.Store
		group string
		opts  []consumer.Option
		// want is part of the error.
		want string
		is   error
	}{
		{name: "NilStore", group: testGroup, want: "nil store"},
		{name: "EmptyGroup", store: store, group: "", is: msgkey.ErrInvalid},
		{name: "LongGroup", store: store, group: strings.Repeat("g", dedupekit.MaxGroupLen+1), is: msgkey.ErrInvalid},
		{name: "ControlInGroup", store: store, group: "g\x01", is: msgkey.ErrInvalid},
		{name: "LongNamespace", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithNamespace(strings.Repeat("n", dedupekit.MaxNamespaceLen+1))}, is: msgkey.ErrInvalid},
		{name: "MaxReconsumeZero", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithMaxReconsumeTimes(0)}, want: "max reconsume times 0"},
		{name: "MaxReconsumeUnlimited", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithMaxReconsumeTimes(-1)}, want: "max reconsume times -1"},
		{name: "NoDelayLevels", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithDelayLevels()}, want: "no delay levels"},
		{name: "UnsortedDelayLevels", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithDelayLevels(time.Second, 10*time.Second, 5*time.Second)}, want: "delay level 3"},
		{name: "ZeroDelayLevel", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithDelayLevels(0, time.Second)}, want: "delay level 1"},
		{name: "NegativeBusyWait", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithBusyWait(-time.Second)}, want: "busy wait"},
		{name: "BadGuard", store: store, group: testGroup,
			opts: []consumer.Option{consumer.WithGuard(dedupe.GuardConfig{Lease: time.Second, ExtendEvery: 2 * time.Second})}, want: "extends every"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := consumer.New(tt.store, tt.group, tt.opts...)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", c)
			}
			if c != nil {
				t.Errorf("New returned a Consumer with the error %v", err)
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.HasPrefix(err.Error(), "consumer: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
	// Equal delay levels are ascending, as the broker allows them.
	if _, err := consumer.New(store, testGroup, consumer.WithDelayLevels(time.Second, time.Second, 2*time.Second)); err != nil {
		t.Errorf("New with equal delay levels: %v", err)
	}
}

// TestNewRetentionHorizon checks that New refuses a retention shorter than
// the group's redelivery horizon, names both and the fixes, and takes it
// with AcceptShortRetention.
func TestNewRetentionHorizon(t *testing.T) {
	retention := func(d time.Duration) consumer.Option {
		return consumer.WithGuard(dedupe.GuardConfig{Retention: d})
	}
	seconds := slices.Repeat([]time.Duration{time.Second}, 18)
	tests := []struct {
		name string
		opts []consumer.Option
		// horizon is the horizon the error names; "" for no error.
		horizon string
		// over says which reconsumes and levels the error counts.
		over string
	}{
		// 10s + 30s + 1m + 2m + … + 10m + 20m + 30m + 1h + 2h.
		{name: "DefaultShort", opts: []consumer.Option{retention(time.Hour)},
			horizon: "4h45m40s", over: "16 reconsumes over RocketMQ's delay levels"},
		{name: "DefaultOneSecondShort", opts: []consumer.Option{retention(4*time.Hour + 45*time.Minute + 39*time.Second)},
			horizon: "4h45m40s", over: "16 reconsumes over RocketMQ's delay levels"},
		{name: "DefaultEqual", opts: []consumer.Option{retention(4*time.Hour + 45*time.Minute + 40*time.Second)}},
		{name: "DefaultRetention"},
		// 10s + 30s + 1m.
		{name: "ThreeReconsumesShort", opts: []consumer.Option{consumer.WithMaxReconsumeTimes(3), retention(time.Minute)},
			horizon: "1m40s", over: "3 reconsumes over RocketMQ's delay levels"},
		{name: "ThreeReconsumesEqual", opts: []consumer.Option{consumer.WithMaxReconsumeTimes(3), retention(100 * time.Second)}},
		// Past the table every reconsume waits its last level: 4h45m40s + 4 × 2h.
		{name: "PastTheLevels", opts: []consumer.Option{consumer.WithMaxReconsumeTimes(20), retention(12 * time.Hour)},
			horizon: "12h45m40s", over: "20 reconsumes over RocketMQ's delay levels"},
		{name: "OwnLevelsShort", opts: []consumer.Option{consumer.WithDelayLevels(seconds...), retention(15 * time.Second)},
			horizon: "16s", over: "16 reconsumes over the delay levels of consumer.WithDelayLevels"},
		{name: "OwnLevelsEqual", opts: []consumer.Option{consumer.WithDelayLevels(seconds...), retention(16 * time.Second)}},
		// Level 3 and past it: 4s each.
		{name: "FewLevels", opts: []consumer.Option{consumer.WithDelayLevels(time.Second, 2*time.Second, 4*time.Second), retention(time.Minute)},
			horizon: "1m4s", over: "16 reconsumes over the delay levels of consumer.WithDelayLevels"},
		{name: "OneLevel", opts: []consumer.Option{consumer.WithDelayLevels(time.Minute), consumer.WithMaxReconsumeTimes(3), retention(2 * time.Minute)},
			horizon: "3m0s", over: "3 reconsumes over the delay levels of consumer.WithDelayLevels"},
		// An orderly consumer's client may allow math.MaxInt32 reconsumes:
		// the horizon saturates rather than overflow into a short one.
		{name: "Saturates", opts: []consumer.Option{consumer.WithMaxReconsumeTimes(math.MaxInt32)},
			horizon: time.Duration(math.MaxInt64).String(), over: "2147483647 reconsumes over RocketMQ's delay levels"},
		{name: "Accepted", opts: []consumer.Option{retention(time.Millisecond), consumer.AcceptShortRetention()}},
		{name: "AcceptedOwnLevels", opts: []consumer.Option{consumer.AcceptShortRetention(), consumer.WithDelayLevels(seconds...), retention(time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := consumer.New(memdedupe.New(memdedupe.Config{}), testGroup, tt.opts...)
			if tt.horizon == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New = %v, nil; want an error naming the horizon %s", c, tt.horizon)
			}
			for _, want := range []string{
				"consumer: retention ",
				"shorter than the group's redelivery horizon " + tt.horizon + " (" + tt.over + ")",
				"at least " + tt.horizon,
				"consumer.WithMaxReconsumeTimes",
				"consumer.AcceptShortRetention()",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	// The message names the retention as given, in full.
	_, err := consumer.New(memdedupe.New(memdedupe.Config{}), testGroup, retention(time.Hour))
	const want = "consumer: retention 1h0m0s is shorter than the group's redelivery horizon 4h45m40s (16 reconsumes over RocketMQ's delay levels): " +
		"a retry after the record expired would run the handler again; " +
		"set a retention (dedupe.GuardConfig.Retention) of at least 4h45m40s, or lower the max reconsumes (the client's, and consumer.WithMaxReconsumeTimes), " +
		"or pass consumer.AcceptShortRetention()"
	if err == nil || err.Error() != want {
		t.Errorf("New with a retention of 1h: %v; want %q", err, want)
	}
}
