package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testkit"
)

// TestBusyWaitsInProcess delivers a key that another consumer holds for a
// short lease, where the consumer must not hand it back: Process waits
// until the lease ends, then runs the message. Each case needs its claim
// to come before the holder's lease ends, so the lease is long enough for
// a loaded machine and the cases wait for it side by side.
func TestBusyWaitsInProcess(t *testing.T) {
	const lease = 2 * time.Second
	short := consumer.WithBusyWait(time.Millisecond)
	tests := []struct {
		name       string
		opts       []consumer.Option
		reconsumed int32
		always     bool
	}{
		// By default a whole lease, which covers this one.
		{name: "DefaultWait"},
		// Handing it back would send it to the dead-letter queue.
		{name: "LastReconsume", opts: []consumer.Option{short, consumer.WithMaxReconsumeTimes(3)}, reconsumed: 3},
		{name: "PastLastReconsume", opts: []consumer.Option{short, consumer.WithMaxReconsumeTimes(3)}, reconsumed: 7},
		// No delay level is as long as the remaining lease.
		{name: "NoLevelCovers", opts: []consumer.Option{short, consumer.WithDelayLevels(time.Millisecond, time.Millisecond)}},
		// A client that would spend a reconsume handing it back (Orderly,
		// Simple).
		{name: "Always", opts: []consumer.Option{short}, always: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := memdedupe.New(memdedupe.Config{})
			heldAt := time.Now()
			hold(t, store, "k", lease)
			c := newConsumer(t, store, tt.opts...)
			l := new(ledger)
			m := msg("k")
			m.Reconsumed = tt.reconsumed
			if v := adapter.Process(context.Background(), c, []consumer.Message{m}, l.handle, adapter.Waiting{Always: tt.always}, nil)[0]; v.Action != adapter.Ack {
				t.Fatalf("verdict %+v; want Ack", v)
			}
			// The store lets the key go only once the lease has ended.
			if waited := time.Since(heldAt); waited < lease {
				t.Errorf("ran %v after the claim, before its lease of %v ended", waited, lease)
			}
			s := c.Stats()
			if l.count("k") != 1 || s.Completed != 1 || s.Busy != 0 || s.Waited != 1 {
				t.Errorf("applied %d, completed %d, busy %d, waited %d; want 1, 1, 0 and 1",
					l.count("k"), s.Completed, s.Busy, s.Waited)
			}
			checkTotals(t, s)
		})
	}
}

// TestBusyHandedBack delivers a key that another consumer holds for longer
// than the busy wait: Process waits that long, then retries the message at
// the first delay level that covers the holder's remaining lease, however
// often it was reconsumed before its last reconsume.
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
		{name: "Reconsumed2", lease: 90 * time.Second, reconsumed: 2, wantLevel: 6},
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
			c := newConsumer(t, store, opts...)
			l := new(ledger)
			m := msg("k")
			m.Reconsumed = tt.reconsumed
			start := time.Now()
			v := process(c, l.handle, m)[0]
			if waited := time.Since(start); waited < busyWait {
				t.Errorf("handed back after %v, before the busy wait of %v", waited, busyWait)
			}
			if v.Action != adapter.Retry || v.Err == nil || !strings.Contains(v.Err.Error(), "held by another consumer") || v.Level != tt.wantLevel {
				t.Fatalf("verdict %+v; want a retry of a busy key at level %d", v, tt.wantLevel)
			}
			s := c.Stats()
			if l.count("k") != 0 || s.Busy != 1 || s.Waited != 1 {
				t.Errorf("applied %d, busy %d, waited %d; want 0, 1 and 1", l.count("k"), s.Busy, s.Waited)
			}
			checkTotals(t, s)
		})
	}
}

// TestBusyHolderEnds ends the holder's claim, held for a minute, or the
// delivery's own context, soon after Process starts waiting: Process acts
// on what the holder left, long before the lease (and the default busy
// wait, as long) would have ended; a context that ends leaves the message
// to the client, outside a drain.
func TestBusyHolderEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(ctx context.CancelFunc, s dedupe.Store, tk dedupe.Ticket) error
		want adapter.Action
		// wantApplied: the waiting delivery ran the message.
		wantApplied int
	}{
		{"Completed", func(_ context.CancelFunc, s dedupe.Store, tk dedupe.Ticket) error {
			return testkit.Complete(context.Background(), s, tk, time.Hour)
		}, adapter.Ack, 0},
		{"Released", func(_ context.CancelFunc, s dedupe.Store, tk dedupe.Ticket) error {
			return testkit.Release(context.Background(), s, tk)
		}, adapter.Ack, 1},
		{"ContextEnds", func(cancel context.CancelFunc, _ dedupe.Store, _ dedupe.Ticket) error {
			cancel()
			return nil
		}, adapter.Hold, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := memdedupe.New(memdedupe.Config{})
			tk := hold(t, store, "k", time.Minute)
			c, l := newConsumer(t, store), new(ledger)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan adapter.Verdict, 1)
			go func() { done <- adapter.Process(ctx, c, msgs("k"), l.handle, adapter.Waiting{}, nil)[0] }()
			testkit.WaitFor(t, "Process to wait", func() bool { return c.Stats().Waited > 0 })
			if err := tt.end(cancel, store, tk); err != nil {
				t.Fatal(err)
			}
			select {
			case v := <-done:
				s := c.Stats()
				if v.Action != tt.want || tt.want == adapter.Hold && !errors.Is(v.Err, context.Canceled) || l.count("k") != tt.wantApplied || s.Busy != 0 {
					t.Errorf("verdict %+v, applied %d, busy %d; want %v, %d and 0", v, l.count("k"), s.Busy, tt.want, tt.wantApplied)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("still waiting 30s after the holder ended")
			}
			checkTotals(t, c.Stats())
		})
	}
}

// TestBusyBatchWithFailure delivers a busy key and a message whose handler
// fails together.
func TestBusyBatchWithFailure(t *testing.T) {
	for _, handedBack := range []bool{false, true} {
		store := memdedupe.New(memdedupe.Config{})
		hold(t, store, "busy", 300*time.Millisecond)
		var opts []consumer.Option
		if handedBack {
			opts = append(opts, consumer.WithBusyWait(time.Millisecond))
		}
		c, l := newConsumer(t, store, opts...), new(ledger)
		errFail := errors.New("not yet")
		l.failing("fail", errFail)
		vs := process(c, l.handle, msgs("busy", "fail")...)
		// Waited for and run, or handed back at the level that covers its
		// lease: level 1, 1s.
		want := adapter.Verdict{Action: adapter.Ack, Outcome: dedupe.Completed}
		if handedBack {
			want = adapter.Verdict{Action: adapter.Retry, Outcome: dedupe.Busy, Delay: time.Second, Level: 1}
		}
		if v := vs[0]; v.Action != want.Action || v.Outcome != want.Outcome || v.Level != want.Level || v.Delay != want.Delay {
			t.Errorf("handed back %v: busy key's verdict %+v, want %+v", handedBack, v, want)
		}
		if v := vs[1]; v.Action != adapter.Retry || !errors.Is(v.Err, errFail) {
			t.Errorf("failed message's verdict %+v, want a retry with its error", v)
		}
		s := c.Stats()
		if s.Failed != 1 || s.Waited != 1 || l.count("busy") != int(s.Completed) {
			t.Errorf("failed %d, waited %d, busy key applied %d, completed %d; want 1, 1 and as completed",
				s.Failed, s.Waited, l.count("busy"), s.Completed)
		}
		checkTotals(t, s)
	}
}

// zeroRemaining answers every claim Busy without a remaining lease,
// which dedupe.Busy allows ("zero when unknown: ask again"): no hook of
// testkit.HookStore changes an answer.
type zeroRemaining struct {
	dedupe.Store
	claims atomic.Int64
}

func (z *zeroRemaining) Claim(_ context.Context, items []dedupe.Item, _ time.Duration) ([]dedupe.ClaimResult, []error, error) {
	z.claims.Add(1)
	res := make([]dedupe.ClaimResult, len(items))
	for i := range res {
		res[i].Outcome = dedupe.Busy
	}
	return res, make([]error, len(items)), nil
}

// TestBusyWithoutRemainingLease delivers a key whose store reports it busy
// but not for how long: Process asks again at a bounded rate, not in a
// tight loop, and retries the message once the busy wait is spent.
func TestBusyWithoutRemainingLease(t *testing.T) {
	z := &zeroRemaining{Store: memdedupe.New(memdedupe.Config{})}
	c := newConsumer(t, z, consumer.WithBusyWait(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan adapter.Verdict, 1)
	go func() { done <- adapter.Process(ctx, c, msgs("k"), new(ledger).handle, adapter.Waiting{}, nil)[0] }()
	select {
	case v := <-done:
		if s := c.Stats(); v.Action != adapter.Retry || s.Busy != 1 || s.Waited != 1 {
			t.Errorf("verdict %+v, busy %d, waited %d; want Retry, 1 and 1", v, s.Busy, s.Waited)
		}
	case <-time.After(10 * time.Second):
		cancel() // ends the loop
		<-done
		t.Errorf("still asking after 10s of a 50ms busy wait: %d claims, waited %d", z.claims.Load(), c.Stats().Waited)
	}
}
