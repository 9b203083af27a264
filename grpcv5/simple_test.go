package grpcv5

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-clients/golang/v5"
	"go.uber.org/goleak"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/testkit"
)

// TestSimpleAppliesEachKeyOnce receives distinct keys and copies of them:
// every message is acknowledged, every key applied once.
func TestSimpleAppliesEachKeyOnce(t *testing.T) {
	store := newStore()
	c := newConsumer(t, store)
	f := &fakeSimple{}
	l := newLedger()
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	var ids []string
	for i, k := range keys {
		f.put(newView("m"+k, k))
		ids = append(ids, "m"+k)
		if i%2 == 0 {
			// Another stored copy: another message id, the same key.
			f.put(newView("copy-"+k, k))
			ids = append(ids, "copy-"+k)
		}
	}
	startReceiver(t, c, f, l.handle, SimpleConfig{Workers: 4, BatchSize: 3})
	testkit.WaitFor(t, "every message acknowledged", func() bool { return len(f.ackedIDs()) == len(ids) })
	if got, want := f.ackedIDs(), slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
		t.Errorf("acknowledged %v, want %v", got, want)
	}
	for _, k := range keys {
		if n := l.count(k); n != 1 {
			t.Errorf("key %s applied %d times, want 1", k, n)
		}
	}
	s := c.Stats()
	if s.Completed != 5 || s.Suppressed != 3 {
		t.Errorf("completed %d, suppressed %d; want 5 and 3", s.Completed, s.Suppressed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.asked {
		if n < 1 || n > 3 {
			t.Errorf("a Receive asked for %d messages; want 1 to 3 (the batch size)", n)
		}
	}
}

// TestSimpleRetries checks what becomes of a message the Consumer retries:
// not acknowledged, and visible again after the delay of its attempt.
func TestSimpleRetries(t *testing.T) {
	tests := []struct {
		name    string
		attempt int32
		opts    []consumer.Option
		want    time.Duration
	}{
		{name: "FirstAttempt", attempt: 1, want: time.Second},
		{name: "ThirdAttempt", attempt: 3, want: 10 * time.Second},
		{name: "PastTheLevels", attempt: 40, want: 2 * time.Hour},
		{name: "OwnLevels", attempt: 2, opts: []consumer.Option{consumer.WithDelayLevels(time.Second, 3*time.Second)}, want: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConsumer(t, newStore(), tt.opts...)
			f := &fakeSimple{}
			l := newLedger()
			l.fail["k"] = 1
			v := newView("m1", "k")
			v.attempt = tt.attempt
			f.put(v)
			startReceiver(t, c, f, l.handle, SimpleConfig{})
			testkit.WaitFor(t, "the retry", func() bool { return len(f.changesOf("m1")) == 1 })
			if got := f.changesOf("m1"); got[0] != tt.want {
				t.Errorf("invisible for %v, want %v", got[0], tt.want)
			}
			if len(f.ackedIDs()) != 0 || l.count("k") != 0 || c.Stats().Failed != 1 {
				t.Errorf("acknowledged %v, applied %d, failed %d; want none, 0, 1", f.ackedIDs(), l.count("k"), c.Stats().Failed)
			}
			// The redelivery, its next attempt, runs at once.
			v2 := newView("m1", "k")
			v2.attempt = tt.attempt + 1
			f.put(v2)
			testkit.WaitFor(t, "the redelivery acknowledged", func() bool { return len(f.ackedIDs()) == 1 })
			if l.count("k") != 1 {
				t.Errorf("applied %d times, want 1", l.count("k"))
			}
		})
	}
}

// TestSimpleFaults: a Receive that fails is tried again after a pause and
// loses nothing; a store that is down runs nothing, and the message waits in
// hand, unacknowledged and not retried, until the store answers, then runs
// once; a failed acknowledgement leaves the
// key recorded done, so the message the proxy hands out again is
// suppressed, not run twice; a renewal that fails is tried again and
// harms nothing in hand.
func TestSimpleFaults(t *testing.T) {
	t.Run("ReceiveFails", func(t *testing.T) {
		c := newConsumer(t, newStore())
		f := &fakeSimple{failReceives: 2}
		f.put(newView("m1", "k"))
		l := newLedger()
		startReceiver(t, c, f, l.handle, SimpleConfig{})
		testkit.WaitFor(t, "the message acknowledged", func() bool { return len(f.ackedIDs()) == 1 })
		if l.count("k") != 1 {
			t.Errorf("applied %d times, want 1", l.count("k"))
		}
	})
	t.Run("StoreDown", func(t *testing.T) {
		fs := testkit.NewFaultStore(newStore())
		fs.Inject(testkit.Fault{})
		c := newConsumer(t, fs)
		f := &fakeSimple{}
		f.put(newView("m1", "k"))
		l := newLedger()
		startReceiver(t, c, f, l.handle, SimpleConfig{})
		testkit.WaitFor(t, "the message waiting for the store", func() bool { return c.Stats().StoreWaited == 1 })
		// In hand, it spends nothing while it waits: no retry, however
		// long the store stays down (a probe asks it meanwhile).
		testkit.WaitFor(t, "a probe", func() bool { return fs.Calls(testkit.OpExtend) > 0 })
		if len(f.ackedIDs()) != 0 || len(f.changesOf("m1")) != 0 || l.count("k") != 0 {
			t.Errorf("acknowledged %v, changed %v, applied %d; want none, none, 0", f.ackedIDs(), f.changesOf("m1"), l.count("k"))
		}
		fs.Heal()
		testkit.WaitFor(t, "the message acknowledged", func() bool { return len(f.ackedIDs()) == 1 })
		if st := c.Stats(); l.count("k") != 1 || st.StoreDown != 0 || st.Completed != 1 || len(f.changesOf("m1")) != 0 {
			t.Errorf("applied %d, store down %d, completed %d, changed %v; want 1, 0, 1, none", l.count("k"), st.StoreDown, st.Completed, f.changesOf("m1"))
		}
	})
	t.Run("AckFails", func(t *testing.T) {
		c := newConsumer(t, newStore())
		f := &fakeSimple{failAck: true}
		f.put(newView("m1", "k"))
		l := newLedger()
		r, _ := startReceiver(t, c, f, l.handle, SimpleConfig{})
		// Out of hand once handled: the acknowledgement was tried.
		testkit.WaitFor(t, "the acknowledgement tried", func() bool { return c.Stats().Completed == 1 && r.inHand() == 0 })
		if len(f.ackedIDs()) != 0 {
			t.Fatalf("acknowledged %v through a failing Ack", f.ackedIDs())
		}
		f.mu.Lock()
		f.failAck = false
		f.mu.Unlock()
		v := newView("m1", "k")
		v.attempt = 2
		f.put(v)
		testkit.WaitFor(t, "the redelivery acknowledged", func() bool { return len(f.ackedIDs()) == 1 })
		if l.count("k") != 1 || c.Stats().Suppressed != 1 {
			t.Errorf("applied %d times, suppressed %d; want 1 and 1", l.count("k"), c.Stats().Suppressed)
		}
	})
	t.Run("RenewalFails", func(t *testing.T) {
		c := newConsumer(t, newStore())
		f := &fakeSimple{failChange: true}
		f.put(newView("m1", "k"))
		l := newLedger()
		l.block = make(chan struct{})
		startReceiver(t, c, f, l.handle, SimpleConfig{InvisibleDuration: time.Second})
		// The message is still due for renewal after a failed one.
		testkit.WaitFor(t, "two renewals tried", func() bool { return len(f.changesOf("m1")) >= 2 })
		close(l.block)
		testkit.WaitFor(t, "the acknowledgement", func() bool { return len(f.ackedIDs()) == 1 })
		if l.count("k") != 1 || c.Stats().Completed != 1 {
			t.Errorf("applied %d times, completed %d; want 1 and 1", l.count("k"), c.Stats().Completed)
		}
	})
}

// TestSimpleBusyKey delivers a key that another consumer holds and then
// dies: the message stays in hand, invisible for at least the holder's
// lease, until the lease ends — whatever the busy wait, for handing it
// back would spend an attempt. (How the wait ends when the holder
// completes or releases the key is consumer's TestBusyHolderEnds.)
func TestSimpleBusyKey(t *testing.T) {
	const lease = time.Second
	store := newStore()
	hold(t, store, "k", lease)
	c := newConsumer(t, store, consumer.WithBusyWait(time.Millisecond), consumer.WithMaxReconsumeTimes(16))
	f := &fakeSimple{}
	l := newLedger()
	f.put(newView("m1", "k"))
	startReceiver(t, c, f, l.handle, SimpleConfig{InvisibleDuration: 10 * time.Second})
	testkit.WaitFor(t, "the acknowledgement", func() bool { return len(f.ackedIDs()) == 1 })
	if s := c.Stats(); l.count("k") != 1 || s.Waited != 1 || s.Busy != 0 || s.Retried != 0 {
		t.Errorf("applied %d, waited %d, busy %d, retried %d; want 1, 1, 0, 0", l.count("k"), s.Waited, s.Busy, s.Retried)
	}
	// Invisible for the holder's lease and a margin, at least: but the
	// invisible duration is longer.
	if ch := f.changesOf("m1"); len(ch) != 0 {
		t.Errorf("invisible duration changed to %v; want it left (10s covers the lease)", ch)
	}
}

// TestSimpleBusyKeyExtendsInvisibility: a holder whose lease outlasts the
// message's invisible duration has the message kept invisible for the
// lease and a margin.
func TestSimpleBusyKeyExtendsInvisibility(t *testing.T) {
	const lease = 5 * time.Second
	store := newStore()
	ticket := hold(t, store, "k", lease)
	c := newConsumer(t, store)
	f := &fakeSimple{}
	f.put(newView("m1", "k"))
	startReceiver(t, c, f, newLedger().handle, SimpleConfig{InvisibleDuration: time.Second})
	testkit.WaitFor(t, "the extension", func() bool { return len(f.changesOf("m1")) > 0 })
	if d := f.changesOf("m1")[0]; d <= lease || d > lease+leaseMargin {
		t.Errorf("invisible for %v; want the lease %v and up to %v more", d, lease, leaseMargin)
	}
	if err := testkit.Complete(context.Background(), store, ticket, time.Minute); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the acknowledgement", func() bool { return len(f.ackedIDs()) == 1 })
	if s := c.Stats(); s.Suppressed != 1 {
		t.Errorf("suppressed %d, want 1", s.Suppressed)
	}
}

// TestSimpleRenewsInHand: a handler that runs longer than the invisible
// duration has its message renewed meanwhile.
func TestSimpleRenewsInHand(t *testing.T) {
	c := newConsumer(t, newStore())
	f := &fakeSimple{}
	f.put(newView("m1", "k"))
	l := newLedger()
	l.block = make(chan struct{})
	startReceiver(t, c, f, l.handle, SimpleConfig{InvisibleDuration: time.Second})
	testkit.WaitFor(t, "two renewals", func() bool { return len(f.changesOf("m1")) >= 2 })
	close(l.block)
	testkit.WaitFor(t, "the acknowledgement", func() bool { return len(f.ackedIDs()) == 1 })
	for _, d := range f.changesOf("m1") {
		if d != time.Second {
			t.Errorf("renewed for %v, want the invisible duration, 1s", d)
		}
	}
}

// TestSimpleDrain stops a receiver while handlers run: within the drain
// timeout they finish and are acknowledged; past it their contexts are
// cancelled and Run's error says so.
func TestSimpleDrain(t *testing.T) {
	// What Run starts ends before it returns. (The clients' packages start
	// goroutines of their own when they are linked.)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("Finishes", func(t *testing.T) {
		c := newConsumer(t, newStore())
		f := &fakeSimple{}
		f.put(newView("m1", "k1"), newView("m2", "k2"))
		l := newLedger()
		l.block = make(chan struct{})
		_, stop := startReceiver(t, c, f, l.handle, SimpleConfig{})
		testkit.WaitFor(t, "both running", func() bool { return c.Stats().Delivered == 2 })
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		select {
		case err := <-stopped:
			t.Fatalf("stopped with handlers running: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		f.put(newView("m3", "k3")) // never received: the loop stopped
		close(l.block)
		if err := <-stopped; err != nil {
			t.Errorf("drain: %v", err)
		}
		if got := f.ackedIDs(); !slices.Equal(got, []string{"m1", "m2"}) {
			t.Errorf("acknowledged %v, want m1 m2", got)
		}
	})
	// An idle long poll under way when the drain starts is cut short at
	// the drain's bound: without that, Close waits for the proxy to end it.
	t.Run("CutsLongPoll", func(t *testing.T) {
		c := newConsumer(t, newStore())
		f := &fakeSimple{longPoll: true}
		_, stop := startReceiver(t, c, f, newLedger().handle, SimpleConfig{DrainTimeout: 50 * time.Millisecond})
		testkit.WaitFor(t, "a receive", func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.asked) == 1
		})
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("drain: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close still waits for the long poll 10s after a 50ms drain bound")
		}
	})
	t.Run("TimesOut", func(t *testing.T) {
		store := newStore()
		hold(t, store, "busy", time.Minute)
		c := newConsumer(t, store)
		f := &fakeSimple{}
		f.put(newView("m1", "k1"), newView("m2", "busy"))
		l := newLedger()
		l.block = make(chan struct{}) // never closed
		_, stop := startReceiver(t, c, f, l.handle, SimpleConfig{DrainTimeout: 100 * time.Millisecond})
		testkit.WaitFor(t, "the handler and the wait", func() bool { return c.Stats().Waited == 1 && c.Stats().Delivered == 2 })
		err := stop()
		if !errors.Is(err, ErrDrainTimeout) {
			t.Errorf("drain: %v, want ErrDrainTimeout", err)
		}
		s := c.Stats()
		// The handler saw its context end and failed: retried. The wait
		// ended: held, left alone.
		if len(f.ackedIDs()) != 0 || s.Failed != 1 || s.Canceled != 1 {
			t.Errorf("acknowledged %v, failed %d, canceled %d; want none, 1, 1", f.ackedIDs(), s.Failed, s.Canceled)
		}
		if ch := f.changesOf("m2"); len(ch) > 1 {
			t.Errorf("the held message's invisibility changed %v; want it left alone", ch)
		}
	})
}

// TestSimpleLifecycle: Run runs once; Close before Run makes Run refuse.
func TestSimpleLifecycle(t *testing.T) {
	c := newConsumer(t, newStore())
	r, stop := startReceiver(t, c, &fakeSimple{}, newLedger().handle, SimpleConfig{})
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := r.run(context.Background()); !errors.Is(err, errClosed) {
		t.Errorf("second Run: %v, want errClosed", err)
	}
	r2, err := newReceiver(c, client[*fakeView](&fakeSimple{}), newLedger().handle, SimpleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.close(); err != nil {
		t.Errorf("Close before Run: %v", err)
	}
	if err := r2.run(context.Background()); !errors.Is(err, errClosed) {
		t.Errorf("Run after Close: %v, want errClosed", err)
	}
}

func TestSimpleConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  SimpleConfig
		ok   bool
	}{
		{"Zero", SimpleConfig{}, true},
		{"NegativeWorkers", SimpleConfig{Workers: -1}, false},
		{"BatchTooLarge", SimpleConfig{BatchSize: 33}, false},
		{"InvisibleTooShort", SimpleConfig{InvisibleDuration: time.Millisecond}, false},
		{"NegativeDrain", SimpleConfig{DrainTimeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.setDefaults()
			if err := cfg.validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
	if _, err := Simple(nil, nil, nil, SimpleConfig{}); err == nil {
		t.Error("Simple(nil, nil, nil) succeeded")
	}
}

// failingChange is a SimpleConsumer whose ChangeInvisibleDuration fails
// as rocketmq-clients v5.1.4's does on an error status: after replacing
// the receipt handle with the answer's empty one.
type failingChange struct{ golang.SimpleConsumer }

func (failingChange) ChangeInvisibleDuration(mv *golang.MessageView, _ time.Duration) error {
	mv.ReceiptHandle = ""
	return &golang.ErrRpcStatus{Code: 50001, Message: "failed"}
}

func TestHandleFixerKeepsReceiptHandle(t *testing.T) {
	mv := &golang.MessageView{ReceiptHandle: "h1"}
	if err := (handleFixer{failingChange{}}).ChangeInvisibleDuration(mv, time.Second); err == nil {
		t.Fatal("no error")
	}
	if mv.ReceiptHandle != "h1" {
		t.Errorf("receipt handle %q after a failed change, want h1", mv.ReceiptHandle)
	}
}

// The busy path is the Consumer's: describe gives it the reconsume count
// that its last-reconsume rule reads. UniqKey, a fallback key, is the
// message id.
func TestDescribe(t *testing.T) {
	v := newView("m1", "k")
	v.attempt = 3
	m := describe(v)
	if m.ID != "m1" || m.Topic != "orders" || m.Reconsumed != 2 || m.Properties["IDEMQ_KEY"] != "k" || string(m.Body) != "body of k" ||
		!slices.Equal(m.Keys, []string{"k"}) || m.Tag != "" || m.Raw != v || UniqKey(&m) != "m1" {
		t.Errorf("describe = %+v", m)
	}
	v.attempt = 0 // unknown
	if m := describe(v); m.Reconsumed != 0 {
		t.Errorf("attempt 0: reconsumed %d, want 0", m.Reconsumed)
	}
}
