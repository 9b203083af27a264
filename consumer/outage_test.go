package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// slowProbes is a fault store whose Extend calls, which only the
// Consumer's probe makes here (handlers take no time), take a while, as a
// go-redis call does against a Redis that is down (its dials and retries),
// and are counted: how many ran at once at most.
type slowProbes struct {
	*testkit.FaultStore
	inFlight, most atomic.Int64
}

func newSlowProbes() *slowProbes {
	return &slowProbes{FaultStore: testkit.NewFaultStore(memdedupe.New(memdedupe.Config{}))}
}

func (s *slowProbes) Extend(ctx context.Context, t dedupe.Ticket, lease time.Duration) error {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
	}
	return s.FaultStore.Extend(ctx, t, lease)
}

// processAll runs Process for each of msgs in a goroutine of its own, as
// concurrent callbacks would, and returns a channel of their verdicts.
func processAll(ctx context.Context, c *consumer.Consumer, msgs []consumer.Message, h consumer.Handler, w adapter.Waiting) <-chan adapter.Verdict {
	out := make(chan adapter.Verdict, len(msgs))
	for _, m := range msgs {
		go func() { out <- adapter.Process(ctx, c, []consumer.Message{m}, h, w, nil)[0] }()
	}
	return out
}

// TestStoreOutageWaits takes the store down while messages are delivered
// one per call, as concurrent callbacks deliver them: none is handed back;
// they wait while one probe at a time asks the store (the waiting messages
// do not call it, nor does a message delivered meanwhile); when it
// answers, each runs once in the same delivery. The outage is logged
// twice, when it begins and when it ends.
func TestStoreOutageWaits(t *testing.T) {
	store := newSlowProbes()
	rec := new(testkit.Logs)
	c := newConsumer(t, store, consumer.WithLogger(slog.New(rec)))
	store.Inject(testkit.Fault{})
	const n = 8
	var msgs []consumer.Message
	for i := range n {
		msgs = append(msgs, message(fmt.Sprint("m", i), fmt.Sprint("k", i), 0))
	}
	var l ledger
	verdicts := processAll(context.Background(), c, msgs, l.handle, adapter.Waiting{})
	st := c.Stats
	testkit.WaitFor(t, "every message waiting", func() bool { return st().StoreWaited == n })
	testkit.WaitFor(t, "a probe", func() bool { return store.Calls(testkit.OpExtend) >= 1 })
	claims := store.Calls(testkit.OpClaim)

	// Delivered during the outage, a message waits without a claim.
	late := processAll(context.Background(), c, []consumer.Message{message("m-late", "k-late", 0)}, l.handle, adapter.Waiting{})
	testkit.WaitFor(t, "the late message waiting", func() bool { return st().StoreWaited == n+1 })
	probes := store.Calls(testkit.OpExtend)
	testkit.WaitFor(t, "two more probes", func() bool { return store.Calls(testkit.OpExtend) >= probes+2 })
	if got := store.Calls(testkit.OpClaim); got != claims {
		t.Errorf("%d claims while the probe asked the store, want none", got-claims)
	}
	if len(verdicts)+len(late) != 0 || st().StoreDown != 0 {
		t.Fatalf("%d verdicts, %d store-down while the store was down; want none", len(verdicts)+len(late), st().StoreDown)
	}

	store.Heal()
	for range n {
		if v := <-verdicts; v.Action != adapter.Ack || v.Outcome != dedupe.Completed {
			t.Errorf("verdict %+v, want completed", v)
		}
	}
	if v := <-late; v.Action != adapter.Ack {
		t.Errorf("late verdict %+v, want completed", v)
	}
	for _, m := range append(msgs, message("m-late", "k-late", 0)) {
		if k := msgkey.Of(&m); l.count(k) != 1 {
			t.Errorf("%s applied %d times, want 1", k, l.count(k))
		}
	}
	if most := store.most.Load(); most != 1 {
		t.Errorf("%d probes called the store at once, want 1", most)
	}
	if st().Outages != 1 || st().StoreDown != 0 || st().Completed != n+1 || st().Retried != 0 {
		t.Errorf("outages %d, store-down %d, completed %d, retried %d; want 1, 0, %d, 0",
			st().Outages, st().StoreDown, st().Completed, st().Retried, n+1)
	}
	logged := rec.Messages()
	if len(logged) != 2 || !isOutageLog(logged[0], "down") || !isOutageLog(logged[1], "answers again") {
		t.Errorf("logged %q; want the outage's start and end", logged)
	}
}

// isOutageLog reports whether msg is an idemq record that says what.
func isOutageLog(msg, what string) bool {
	return strings.HasPrefix(msg, "idemq: ") && strings.Contains(msg, what)
}

// TestStoreOutageStops: a message waiting for the store is held, not
// retried, when a drain begins or its delivery's context ends; its wait,
// once spent, hands it back (store-down, retried), unless it is on its last
// reconsume or its adapter always waits: those wait on until the store
// answers.
func TestStoreOutageStops(t *testing.T) {
	t.Run("Drain", func(t *testing.T) {
		store := newSlowProbes()
		c := newConsumer(t, store)
		store.Inject(testkit.Fault{})
		var l ledger
		v := processAll(context.Background(), c, []consumer.Message{message("m1", "k1", 0)}, l.handle, adapter.Waiting{})
		testkit.WaitFor(t, "the message waiting", func() bool { return c.Stats().StoreWaited == 1 })
		stopped := make(chan struct{})
		if err := adapter.Drain(context.Background(), c, func() error { close(stopped); return nil }); err != nil {
			t.Errorf("Drain = %v", err)
		}
		got := <-v
		select {
		case <-stopped:
		default:
			t.Error("the held call returned before the client stopped")
		}
		if got.Action != adapter.Hold || !errors.Is(got.Err, adapter.ErrDraining) {
			t.Errorf("verdict %+v, want held with ErrDraining", got)
		}
		if st := c.Stats(); st.StoreDown != 0 || st.Canceled != 1 || l.count("k1") != 0 {
			t.Errorf("store-down %d, held %d, applied %d; want 0, 1, 0", st.StoreDown, st.Canceled, l.count("k1"))
		}
	})
	t.Run("ContextEnds", func(t *testing.T) {
		store := newSlowProbes()
		c := newConsumer(t, store)
		store.Inject(testkit.Fault{})
		ctx, cancel := context.WithCancel(context.Background())
		v := processAll(ctx, c, []consumer.Message{message("m1", "k1", 0)}, (&ledger{}).handle, adapter.Waiting{})
		testkit.WaitFor(t, "the message waiting", func() bool { return c.Stats().StoreWaited == 1 })
		cancel()
		if got := <-v; got.Action != adapter.Hold || got.Outcome != dedupe.Canceled || !errors.Is(got.Err, context.Canceled) {
			t.Errorf("verdict %+v, want held with context.Canceled", got)
		}
		// The last waiter out stopped the probe: no call is under way.
		if n := store.inFlight.Load(); n != 0 {
			t.Errorf("%d probes still calling the store", n)
		}
	})
	t.Run("WaitSpent", func(t *testing.T) {
		store := newSlowProbes()
		c := newConsumer(t, store, consumer.WithStoreDownWait(time.Millisecond))
		store.Inject(testkit.Fault{})
		v := adapter.Process(context.Background(), c, []consumer.Message{message("m1", "k1", 2)}, (&ledger{}).handle, adapter.Waiting{}, nil)[0]
		if v.Action != adapter.Retry || v.Outcome != dedupe.StoreDown || v.Level != 3 {
			t.Errorf("verdict %+v, want store-down retried at level 3 (its attempt's)", v)
		}
		if st := c.Stats(); st.StoreWaited != 1 || st.StoreDown != 1 {
			t.Errorf("waited %d, store-down %d; want 1, 1", st.StoreWaited, st.StoreDown)
		}
	})
	for _, tt := range []struct {
		name       string
		reconsumed int32
		w          adapter.Waiting
	}{
		{"LastReconsume", 3, adapter.Waiting{}},
		{"Always", 0, adapter.Waiting{Always: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newSlowProbes()
			c := newConsumer(t, store, consumer.WithStoreDownWait(time.Millisecond), consumer.WithMaxReconsumeTimes(3))
			store.Inject(testkit.Fault{})
			var l ledger
			v := processAll(context.Background(), c, []consumer.Message{message("m1", "k1", tt.reconsumed)}, l.handle, tt.w)
			testkit.WaitFor(t, "the message waiting", func() bool { return c.Stats().StoreWaited == 1 })
			// Three probes back off 50, 100 and 200 ms: far past the wait.
			testkit.WaitFor(t, "three probes", func() bool { return store.Calls(testkit.OpExtend) >= 3 })
			if len(v) != 0 {
				t.Fatalf("verdict %+v while the store was down; want it waiting", <-v)
			}
			store.Heal()
			if got := <-v; got.Action != adapter.Ack || l.count("k1") != 1 {
				t.Errorf("verdict %+v, applied %d; want completed once", got, l.count("k1"))
			}
		})
	}
}

// TestStoreOutageFailOpen: with FailOpen a failed claim runs the handler
// unguarded, as before; nothing waits and no probe asks the store.
func TestStoreOutageFailOpen(t *testing.T) {
	store := newSlowProbes()
	c := newConsumer(t, store, consumer.WithGuard(dedupe.GuardConfig{FailOpen: true}))
	store.Inject(testkit.Fault{Ops: testkit.OpClaim})
	var l ledger
	v := adapter.Process(context.Background(), c, []consumer.Message{message("m1", "k1", 0)}, l.handle, adapter.Waiting{Always: true}, nil)[0]
	if v.Action != adapter.Ack || v.Outcome != dedupe.Unguarded || l.count("k1") != 1 {
		t.Errorf("verdict %+v, applied %d; want unguarded, once", v, l.count("k1"))
	}
	st := c.Stats
	if st().StoreWaited != 0 || st().Outages != 0 || store.Calls(testkit.OpExtend) != 0 {
		t.Errorf("waited %d, outages %d, probes %d; want none", st().StoreWaited, st().Outages, store.Calls(testkit.OpExtend))
	}
}

// TestStoreOutageBusyKey: a message waiting for a key another consumer
// holds finds the store down when it asks again, waits for the store, then
// for the key again, and runs once the holder releases it.
func TestStoreOutageBusyKey(t *testing.T) {
	store := newSlowProbes()
	tk := hold(t, store, "busy", time.Minute)
	c := newConsumer(t, store)
	var l ledger
	v := processAll(context.Background(), c, []consumer.Message{message("m1", "busy", 0)}, l.handle, adapter.Waiting{})
	st := c.Stats
	testkit.WaitFor(t, "the message waiting for the key", func() bool { return st().Waited == 1 })
	store.Inject(testkit.Fault{})
	testkit.WaitFor(t, "the message waiting for the store", func() bool { return st().StoreWaited == 1 })
	claims := store.Calls(testkit.OpClaim)
	store.Heal()
	testkit.WaitFor(t, "the key asked about again", func() bool {
		return store.Calls(testkit.OpClaim) > claims
	})
	if err := testkit.Release(context.Background(), store, tk); err != nil {
		t.Fatal(err)
	}
	if got := <-v; got.Outcome != dedupe.Completed || l.count("busy") != 1 {
		t.Errorf("verdict %+v, applied %d; want completed once", got, l.count("busy"))
	}
	if st().Waited != 1 || st().StoreWaited != 1 || st().Outages != 1 || st().Busy+st().StoreDown != 0 {
		t.Errorf("waited for a key %d, for the store %d, outages %d, handed back %d; want 1, 1, 1, 0",
			st().Waited, st().StoreWaited, st().Outages, st().Busy+st().StoreDown)
	}
}

// TestStoreOutageStaleAnswer: a message claimed before the store went down
// finishes during the outage, its completion failing (unrecorded): the
// answer its claim got before the outage does not end it. The outage ends
// once, when the store answers again.
func TestStoreOutageStaleAnswer(t *testing.T) {
	store := newSlowProbes()
	rec := new(testkit.Logs)
	c := newConsumer(t, store, consumer.WithLogger(slog.New(rec)))
	running, release := make(chan struct{}), make(chan struct{})
	var l ledger
	slow := func(ctx context.Context, m *consumer.Message) error {
		close(running)
		<-release
		return l.handle(ctx, m)
	}
	first := processAll(context.Background(), c, []consumer.Message{message("m1", "k1", 0)}, slow, adapter.Waiting{})
	<-running
	store.Inject(testkit.Fault{})
	second := processAll(context.Background(), c, []consumer.Message{message("m2", "k2", 0)}, l.handle, adapter.Waiting{})
	st := c.Stats
	testkit.WaitFor(t, "the second message waiting", func() bool { return st().StoreWaited == 1 })
	close(release)
	if v := <-first; v.Outcome != dedupe.Unrecorded {
		t.Errorf("first verdict %+v, want unrecorded", v)
	}
	if len(second) != 0 || st().Outages != 1 {
		t.Fatalf("%d verdicts for the waiting message, %d outages; want it waiting in the one outage", len(second), st().Outages)
	}
	for _, m := range rec.Messages() {
		if isOutageLog(m, "answers again") {
			t.Fatalf("logged %q while the store was down", m)
		}
	}
	store.Heal()
	if v := <-second; v.Outcome != dedupe.Completed {
		t.Errorf("second verdict %+v, want completed", v)
	}
	var outage []string
	for _, m := range rec.Messages() {
		if isOutageLog(m, "dedupe store") {
			outage = append(outage, m)
		}
	}
	if st().Outages != 1 || len(outage) != 2 {
		t.Errorf("%d outages, logged %q; want one, logged at its start and end", st().Outages, outage)
	}
}
