package remoting_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/remoting"
)

// TestBusyWaitsInProcess delivers a key that another consumer holds for a
// short lease, where the consumer must not hand it back: the callback waits
// in process until the lease ends, then runs the message. Each case needs
// its claim to come before the holder's lease ends, so the lease is long
// enough for a loaded machine and the cases wait for it side by side.
func TestBusyWaitsInProcess(t *testing.T) {
	const lease = 2 * time.Second
	short := consumer.WithBusyWait(time.Millisecond)
	tests := []struct {
		name       string
		opts       []consumer.Option
		reconsumed int32
		orderly    bool
	}{
		// By default a whole lease, which covers this one.
		{name: "DefaultWait"},
		// Handing it back would send it to the dead-letter queue.
		{name: "LastReconsume", opts: []consumer.Option{short, consumer.WithMaxReconsumeTimes(3)}, reconsumed: 3},
		{name: "PastLastReconsume", opts: []consumer.Option{short, consumer.WithMaxReconsumeTimes(3)}, reconsumed: 7},
		// No delay level is as long as the remaining lease.
		{name: "NoLevelCovers", opts: []consumer.Option{short, consumer.WithDelayLevels(time.Millisecond, time.Millisecond)}},
		// A suspension would spend a reconsume too.
		{name: "Orderly", opts: []consumer.Option{short}, orderly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := memdedupe.New(memdedupe.Config{})
			heldAt := time.Now()
			hold(t, store, "k", lease)
			cc, _ := newConsumer(t, store, tt.opts...)
			c := newCounter()
			m := msg("k")
			m.ReconsumeTimes = tt.reconsumed
			ccx := &primitive.ConsumeConcurrentlyContext{}
			oc := primitive.NewConsumeOrderlyContext()
			ctx := primitive.WithOrderlyCtx(primitive.WithConcurrentlyCtx(context.Background(), ccx), oc)
			cb := remoting.Concurrently(cc, c.handle)
			if tt.orderly {
				cb = remoting.Orderly(cc, c.handle)
			}
			if res, err := cb(ctx, m); res != rmq.ConsumeSuccess || err != nil {
				t.Fatalf("callback = %v, %v; want success", res, err)
			}
			// The store lets the key go only once the lease has ended.
			if waited := time.Since(heldAt); waited < lease {
				t.Errorf("ran %v after the claim, before its lease of %v ended", waited, lease)
			}
			s := cc.Stats()
			if c.count("k") != 1 || s.Completed.Load() != 1 || s.Busy.Load() != 0 || s.Waited.Load() != 1 {
				t.Errorf("applied %d, completed %d, busy %d, waited %d; want 1, 1, 0 and 1",
					c.count("k"), s.Completed.Load(), s.Busy.Load(), s.Waited.Load())
			}
			checkTotals(t, s)
			if ccx.DelayLevelWhenNextConsume != 0 || oc.SuspendCurrentQueueTimeMillis != -1 {
				t.Errorf("delay level %d, suspension %d ms; want neither", ccx.DelayLevelWhenNextConsume, oc.SuspendCurrentQueueTimeMillis)
			}
		})
	}
}

// TestBusyHandedBack delivers a key that another consumer holds for longer
// than the busy wait: the callback waits that long, then hands the message
// back at the first delay level that covers the holder's remaining lease.
func TestBusyHandedBack(t *testing.T) {
	const busyWait = 20 * time.Millisecond
	tests := []struct {
		name       string
		lease      time.Duration
		levels     []time.Duration // nil: the broker's default
		reconsumed int32
		wantLevel  int
	}{
		{name: "90s", lease: 90 * time.Second, wantLevel: 6},         // 2m
		{name: "10s", lease: 10 * time.Second, wantLevel: 3},         // 10s
		{name: "4s", lease: 4 * time.Second, wantLevel: 2},           // 5s
		{name: "800ms", lease: 800 * time.Millisecond, wantLevel: 1}, // 1s
		{name: "OwnLevels", lease: 3 * time.Second, levels: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, wantLevel: 3},
		{name: "BeforeLastReconsume", lease: 90 * time.Second, reconsumed: 15, wantLevel: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memdedupe.New(memdedupe.Config{})
			hold(t, store, "k", tt.lease)
			opts := []consumer.Option{consumer.WithBusyWait(busyWait), consumer.WithMaxReconsumeTimes(16)}
			if tt.levels != nil {
				opts = append(opts, consumer.WithDelayLevels(tt.levels...))
			}
			c, cb, s, _ := setup(t, store, opts...)
			m := msg("k")
			m.ReconsumeTimes = tt.reconsumed
			cc := &primitive.ConsumeConcurrentlyContext{}
			start := time.Now()
			res, err := cb(primitive.WithConcurrentlyCtx(context.Background(), cc), m)
			if waited := time.Since(start); waited < busyWait {
				t.Errorf("handed back after %v, before the busy wait of %v", waited, busyWait)
			}
			if res != rmq.ConsumeRetryLater || err == nil || !strings.Contains(err.Error(), "held by another consumer") {
				t.Fatalf("callback = %v, %v; want retry later for a busy key", res, err)
			}
			if cc.DelayLevelWhenNextConsume != tt.wantLevel {
				t.Errorf("delay level %d, want %d", cc.DelayLevelWhenNextConsume, tt.wantLevel)
			}
			if c.count("k") != 0 || s.Busy.Load() != 1 || s.Waited.Load() != 1 {
				t.Errorf("applied %d, busy %d, waited %d; want 0, 1 and 1", c.count("k"), s.Busy.Load(), s.Waited.Load())
			}
			checkTotals(t, s)
		})
	}
}

// TestBusyHolderEnds ends the holder's claim while the callback waits for
// it: the callback then acts on what the holder left.
func TestBusyHolderEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(context.Context, dedupe.Store, dedupe.Ticket) error
		// wantApplied: the waiting callback ran the message.
		wantApplied int
	}{
		{"Completed", func(ctx context.Context, s dedupe.Store, tk dedupe.Ticket) error {
			return testkit.Complete(ctx, s, tk, time.Hour)
		}, 0},
		{"Released", func(ctx context.Context, s dedupe.Store, tk dedupe.Ticket) error {
			return testkit.Release(ctx, s, tk)
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memdedupe.New(memdedupe.Config{})
			tk := hold(t, store, "k", 2*time.Second)
			c, cb, s, _ := setup(t, store)
			type answer struct {
				res rmq.ConsumeResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := cb(context.Background(), msg("k"))
				done <- answer{res, err}
			}()
			testkit.WaitFor(t, "the callback to wait", func() bool { return s.Waited.Load() > 0 })
			if err := tt.end(context.Background(), store, tk); err != nil {
				t.Fatal(err)
			}
			if a := <-done; a.res != rmq.ConsumeSuccess || a.err != nil {
				t.Fatalf("callback = %v, %v; want success", a.res, a.err)
			}
			if c.count("k") != tt.wantApplied || s.Busy.Load() != 0 {
				t.Errorf("applied %d, busy %d; want %d and 0", c.count("k"), s.Busy.Load(), tt.wantApplied)
			}
			checkTotals(t, s)
		})
	}
}

// TestBusyHolderEndsEarly ends the holder's claim soon after the callback
// starts waiting for a key held for a minute: the callback notices long
// before the lease (and the default busy wait, as long) would have ended.
func TestBusyHolderEndsEarly(t *testing.T) {
	const lease = time.Minute
	store := memdedupe.New(memdedupe.Config{})
	tk := hold(t, store, "k", lease)
	c, cb, s, _ := setup(t, store)
	done := make(chan rmq.ConsumeResult, 1)
	go func() {
		res, _ := cb(context.Background(), msg("k"))
		done <- res
	}()
	testkit.WaitFor(t, "the callback to wait", func() bool { return s.Waited.Load() > 0 })
	if err := testkit.Complete(context.Background(), store, tk, time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res != rmq.ConsumeSuccess || c.count("k") != 0 || s.Suppressed.Load() != 1 {
			t.Errorf("callback = %v, applied %d, suppressed %d; want success, 0 and 1", res, c.count("k"), s.Suppressed.Load())
		}
	case <-time.After(lease / 2):
		t.Fatalf("still waiting %v after the holder completed the key", lease/2)
	}
}

// TestBusyBatchWithFailure delivers a batch of a busy key and a message
// whose handler fails.
func TestBusyBatchWithFailure(t *testing.T) {
	tests := []struct {
		name string
		opts []consumer.Option
		// wantBusy: the busy key is handed back rather than run.
		wantBusy  bool
		wantLevel int
	}{
		// The busy key is waited for and run; only the failure is retried,
		// with the broker's back-off.
		{name: "Waited", wantBusy: false, wantLevel: 0},
		// The batch comes back no sooner than the busy key's lease ends.
		{name: "HandedBack", opts: []consumer.Option{noWait}, wantBusy: true, wantLevel: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memdedupe.New(memdedupe.Config{})
			hold(t, store, "busy", 300*time.Millisecond)
			c, cb, s, _ := setup(t, store, tt.opts...)
			errFail := errors.New("not yet")
			c.fail["fail"] = errFail
			cc := &primitive.ConsumeConcurrentlyContext{}
			res, err := cb(primitive.WithConcurrentlyCtx(context.Background(), cc), msg("busy"), msg("fail"))
			if res != rmq.ConsumeRetryLater || !errors.Is(err, errFail) {
				t.Fatalf("callback = %v, %v; want retry later with the failure", res, err)
			}
			if got := strings.Contains(err.Error(), "held by another consumer"); got != tt.wantBusy {
				t.Errorf("error %q reports the busy key: %v, want %v", err, got, tt.wantBusy)
			}
			if cc.DelayLevelWhenNextConsume != tt.wantLevel {
				t.Errorf("delay level %d, want %d", cc.DelayLevelWhenNextConsume, tt.wantLevel)
			}
			wantApplied, wantBusy := 1, int64(0)
			if tt.wantBusy {
				wantApplied, wantBusy = 0, 1
			}
			if c.count("busy") != wantApplied || s.Busy.Load() != wantBusy || s.Failed.Load() != 1 || s.Waited.Load() != 1 {
				t.Errorf("busy key applied %d, busy %d, failed %d, waited %d; want %d, %d, 1 and 1",
					c.count("busy"), s.Busy.Load(), s.Failed.Load(), s.Waited.Load(), wantApplied, wantBusy)
			}
			checkTotals(t, s)
		})
	}
}

// TestBusyWaitEndsWithContext ends the callback's own context while it
// waits for a busy key: outside a drain, the message is retried at once.
func TestBusyWaitEndsWithContext(t *testing.T) {
	store := memdedupe.New(memdedupe.Config{})
	hold(t, store, "k", time.Minute)
	c, cb, s, _ := setup(t, store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type answer struct {
		res rmq.ConsumeResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cb(ctx, msg("k"))
		done <- answer{res, err}
	}()
	testkit.WaitFor(t, "the callback to wait", func() bool { return s.Waited.Load() > 0 })
	cancel()
	a := <-done
	if a.res != rmq.ConsumeRetryLater || !errors.Is(a.err, context.Canceled) {
		t.Fatalf("callback = %v, %v; want retry later with context.Canceled", a.res, a.err)
	}
	if c.count("k") != 0 {
		t.Errorf("applied %d times, want 0", c.count("k"))
	}
	checkTotals(t, s)
}

// zeroRemaining answers every claim Busy without a remaining lease,
// which dedupe.Busy allows ("zero when unknown: ask again").
type zeroRemaining struct {
	dedupe.Store
	claims atomic.Int64
}

func (z *zeroRemaining) Claim(_ context.Context, reqs []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	z.claims.Add(1)
	res := make([]dedupe.ClaimResult, len(reqs))
	for i := range res {
		res[i].Outcome = dedupe.Busy
	}
	return res, make([]error, len(reqs)), nil
}

// TestBusyWithoutRemainingLease delivers a key whose store reports it busy
// but not for how long: the callback asks again at a bounded rate, not in a
// tight loop, and hands the message back once the busy wait is spent.
func TestBusyWithoutRemainingLease(t *testing.T) {
	z := &zeroRemaining{Store: memdedupe.New(memdedupe.Config{})}
	_, cb, s, _ := setup(t, z, consumer.WithBusyWait(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan rmq.ConsumeResult, 1)
	go func() {
		res, _ := cb(ctx, msg("k"))
		done <- res
	}()
	select {
	case res := <-done:
		if res != rmq.ConsumeRetryLater || s.Busy.Load() != 1 || s.Waited.Load() != 1 {
			t.Errorf("callback = %v, busy %d, waited %d; want retry later, 1 and 1", res, s.Busy.Load(), s.Waited.Load())
		}
	case <-time.After(10 * time.Second):
		cancel() // ends the loop
		<-done
		t.Errorf("still asking after 10s of a 50ms busy wait: %d claims, waited %d", z.claims.Load(), s.Waited.Load())
	}
}
