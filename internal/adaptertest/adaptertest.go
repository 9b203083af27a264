// Package adaptertest is the conformance suite of the client adapters of
// package consumer, in the style of gocloud's drivertest: each adapter
// (remoting.Concurrently and remoting.Orderly, grpcv5.Simple and
// grpcv5.Push) gives a [Harness] that sends keyed messages to a fresh
// topic and runs its consumer of that topic against a real broker, and
// [Run] checks, case by case, what every adapter must do: suppress a
// duplicate, wait for a busy key without spending a retry, neither lose
// nor double a message while the store is down, redeliver a failure and a
// panic, keep a queue's order (orderly and FIFO adapters), consume
// batches, and drain on shutdown. Each case has a topic and a group of
// its own and runs at the same time as the others; each asserts exact counts
// ([testkit.Tally]).
//
// The package is test support, internal so that it adds nothing to the
// module's public surface.
package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

// Harness is what an adapter gives the suite.
type Harness struct {
	// Ordered says the adapter keeps the order of a queue's (a FIFO
	// message group's) messages: the Order case runs.
	Ordered bool
	// RetryBreaksOrder says the client lets a queue's later messages pass
	// one it retries, so that the Order case fails none: the 5.x client's
	// FIFO consume service (v5.1.4) schedules the retry of a failed
	// message and moves on to the next at once.
	RetryBreaksOrder bool
	// Options are the Consumer options the adapter's clients need, such
	// as the group's delay levels and max reconsumes.
	Options []consumer.Option
	// New makes a fresh topic and consumer group for one case.
	New func(t *testing.T) Env
}

// Env is one case's topic and consumer group on the broker.
type Env struct {
	// Group is the consumer group the case's Consumers are of.
	Group string
	// Send sends a message for each key, in order, with the key stamped
	// as the adapters' producers stamp it (for an Ordered adapter, all to one
	// queue or message group), and fails t if one is not sent.
	Send func(t *testing.T, keys ...string)
	// Start starts a consumer of the topic in the group that runs h
	// through c, in batches of up to 16 messages if batch and the client
	// can, and returns what drains it: stops it without cutting off a
	// running handler, as the adapter's Drain (or Close) does.
	Start func(t *testing.T, c *consumer.Consumer, h consumer.Handler, batch bool) (drain func(context.Context) error)
	// Batched, if set, counts the messages the client delivered in
	// deliveries of more than one: the Batch case checks that batches
	// came.
	Batched func() int64
}

// Run runs every case of the suite against h, all at once whatever
// -test.parallel says: they wait on the broker's timers, not the CPU.
func Run(t *testing.T, h Harness) {
	cases := map[string]func(*testing.T, *kase){
		"Duplicates": duplicates, "BusyKey": busyKey, "StoreDown": storeDown,
		"Failure": failure(false), "Panic": failure(true), "Batch": batch, "Drain": drain,
	}
	if h.Ordered {
		cases["Order"] = order
	}
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		wg.Go(func() {
			t.Run(name, func(t *testing.T) { cases[name](t, newCase(t, h)) })
		})
	}
	wg.Wait()
}

// kase is one case under way: its topic and group, a store the case may
// fail or hold keys in, and the effect under test.
type kase struct {
	Env
	h     Harness
	mem   *memdedupe.Store
	store *testkit.HookStore
	// down fails every call of the store while set.
	down atomic.Bool
	logs *testkit.Logs
	l    *ledger
}

func newCase(t *testing.T, h Harness) *kase {
	k := &kase{Env: h.New(t), h: h, mem: memdedupe.New(memdedupe.Config{}), logs: new(testkit.Logs), l: newLedger()}
	fail := func(context.Context) error {
		if k.down.Load() {
			return errors.New("adaptertest: store down")
		}
		return nil
	}
	tickets := func(ctx context.Context, _ []dedupe.Ticket) error { return fail(ctx) }
	k.store = &testkit.HookStore{Store: k.mem, Hooks: testkit.StoreHooks{
		Claim:    func(ctx context.Context, _ []dedupe.Item) error { return fail(ctx) },
		Complete: tickets, Release: tickets,
		Extend: func(ctx context.Context, _ dedupe.Ticket) error { return fail(ctx) },
	}}
	return k
}

// consumer is a Consumer of the case's group on its store, logging into
// the case's logs.
func (k *kase) consumer(t *testing.T, opts ...consumer.Option) *consumer.Consumer {
	t.Helper()
	opts = slices.Concat([]consumer.Option{consumer.WithLogger(slog.New(k.logs))}, k.h.Options, opts)
	c, err := consumer.New(k.store, k.Group, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start runs a consumer of the case on h until the test ends, then
// drains it.
func (k *kase) start(t *testing.T, c *consumer.Consumer, h consumer.Handler, batch bool) {
	t.Helper()
	drain := k.Start(t, c, h, batch)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := drain(ctx); err != nil {
			t.Errorf("drain: %v", err)
		}
	})
}

// keys returns n keys of the case, of this run.
func keys(t *testing.T, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s-%d-%d", t.Name(), time.Now().UnixNano(), i)
	}
	return ks
}

// ledger is the effect under test: each key applied, in order, and the
// keys that fail or panic on their first run.
type ledger struct {
	mu       sync.Mutex
	applied  []string
	failOnce map[string]error // nil error: panic
	// reconsumed are the deliveries' reconsume times, by key.
	reconsumed map[string][]int32
}

func newLedger() *ledger {
	return &ledger{failOnce: map[string]error{}, reconsumed: map[string][]int32{}}
}

func (l *ledger) handle(_ context.Context, m *consumer.Message) error {
	key := msgkey.Of(m)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reconsumed[key] = append(l.reconsumed[key], m.Reconsumed)
	if err, ok := l.failOnce[key]; ok {
		delete(l.failOnce, key)
		if err == nil {
			panic("adaptertest: panic in " + key)
		}
		return err
	}
	l.applied = append(l.applied, key)
	return nil
}

// counts returns how often each key was applied.
func (l *ledger) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[string]int{}
	for _, k := range l.applied {
		n[k]++
	}
	return n
}

// deliveries returns the reconsume times of key's deliveries that reached
// the handler.
func (l *ledger) deliveries(key string) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reconsumed[key])
}

// settle waits until every key of sent is applied, then a quiet second
// more so that a late duplicate shows, and checks that each was applied
// exactly once.
func (k *kase) settle(t *testing.T, sent []string) {
	t.Helper()
	testkit.WaitFor(t, "every key applied", func() bool {
		n := k.l.counts()
		return !slices.ContainsFunc(sent, func(s string) bool { return n[s] == 0 })
	})
	time.Sleep(time.Second)
	testkit.Count(sent, k.l.counts(), nil).Check(t)
}

// sum adds f of each of stats.
func sum(f func(consumer.Stats) int64, cs ...*consumer.Consumer) (n int64) {
	for _, c := range cs {
		n += f(c.Stats())
	}
	return n
}

func failed(s consumer.Stats) int64     { return s.Failed }
func suppressed(s consumer.Stats) int64 { return s.Suppressed }

// duplicates sends keys and some of them again: each is applied once, the
// copies suppressed.
func duplicates(t *testing.T, k *kase) {
	sent := keys(t, 20)
	c := k.consumer(t)
	k.start(t, c, k.l.handle, false)
	k.Send(t, append(slices.Clone(sent), sent[:8]...)...)
	k.settle(t, sent)
	// A rebalance may deliver a copy twice: at least, not exactly.
	if n := sum(suppressed, c); n < 8 {
		t.Errorf("suppressed %d, want at least the 8 copies", n)
	}
}

// busyKey sends a key that another consumer holds: the adapter waits for
// it in process and runs it once the holder lets it go, spending no
// retry.
func busyKey(t *testing.T, k *kase) {
	sent := keys(t, 1)
	ref := dedupe.Ref{Group: k.Group, Key: sent[0]}
	res, err := testkit.Claim(t.Context(), k.mem, dedupe.Item{Ref: ref}, time.Minute)
	if err != nil || res.Outcome != dedupe.Acquired {
		t.Fatalf("hold the key: %v, %v", res.Outcome, err)
	}
	c := k.consumer(t)
	k.start(t, c, k.l.handle, false)
	k.Send(t, sent...)
	testkit.WaitFor(t, "the consumer to wait for the key", func() bool { return c.Stats().Waited > 0 })
	if err := testkit.Release(t.Context(), k.mem, dedupe.Ticket{Ref: ref, Token: res.Token}); err != nil {
		t.Fatal(err)
	}
	k.settle(t, sent)
	s := c.Stats()
	if s.Waited != 1 || s.Busy != 0 || s.Retried != 0 {
		t.Errorf("waited %d, busy %d, retried %d; want 1, 0 and 0", s.Waited, s.Busy, s.Retried)
	}
	if r := k.l.deliveries(sent[0]); !slices.Equal(r, []int32{0}) {
		t.Errorf("ran on reconsumes %v, want the first delivery only", r)
	}
}

// storeDown fails every store call until the consumer has noticed, then heals
// the store: every message is applied once, whether the adapter waited
// for the store in process or had the message redelivered.
func storeDown(t *testing.T, k *kase) {
	sent := keys(t, 5)
	k.down.Store(true)
	c := k.consumer(t, consumer.WithStoreDownWait(200*time.Millisecond))
	k.start(t, c, k.l.handle, false)
	k.Send(t, sent...)
	testkit.WaitFor(t, "the outage to be noticed", func() bool { return c.Stats().Outages > 0 })
	time.Sleep(500 * time.Millisecond)
	k.down.Store(false)
	k.settle(t, sent)
	s := c.Stats()
	if s.Outages != 1 || s.StoreDown+s.StoreWaited == 0 {
		t.Errorf("outages %d, store down %d, waited for the store %d; want 1 outage that held messages",
			s.Outages, s.StoreDown, s.StoreWaited)
	}
	if !slices.ContainsFunc(k.logs.Messages(), func(m string) bool { return strings.HasPrefix(m, "idemq: dedupe store down") }) {
		t.Errorf("the outage was not logged; logged %q", k.logs.Messages())
	}
}

// failure has some keys fail (or panic) on their first run: each is
// redelivered and applied once, and counted failed once.
func failure(panics bool) func(*testing.T, *kase) {
	return func(t *testing.T, k *kase) {
		sent := keys(t, 10)
		for _, key := range sent[1:4] {
			k.l.failOnce[key] = errors.New("adaptertest: failure")
			if panics {
				k.l.failOnce[key] = nil
			}
		}
		c := k.consumer(t)
		k.start(t, c, k.l.handle, false)
		k.Send(t, sent...)
		k.settle(t, sent)
		if n := sum(failed, c); n != 3 {
			t.Errorf("failed %d, want 3", n)
		}
		for _, key := range sent[1:4] {
			if r := k.l.deliveries(key); len(r) < 2 || r[0] != 0 || r[len(r)-1] == 0 {
				t.Errorf("%s ran on reconsumes %v, want a redelivery after the first", key, r)
			}
		}
	}
}

// order sends keys to one queue, one failing once (unless
// RetryBreaksOrder): they are applied in the order sent, the failed one
// before those after it.
func order(t *testing.T, k *kase) {
	sent := keys(t, 20)
	if !k.h.RetryBreaksOrder {
		k.l.failOnce[sent[3]] = errors.New("adaptertest: failure")
	}
	c := k.consumer(t)
	k.start(t, c, k.l.handle, false)
	k.Send(t, sent...)
	k.settle(t, sent)
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	if !slices.Equal(k.l.applied, sent) {
		t.Errorf("applied %q, want them in the order sent %q", k.l.applied, sent)
	}
}

// batch consumes messages sent before the consumer starts, in batches
// where the client batches, one failing once: each is applied once.
func batch(t *testing.T, k *kase) {
	sent := keys(t, 32)
	k.l.failOnce[sent[5]] = errors.New("adaptertest: failure")
	k.Send(t, sent...)
	c := k.consumer(t)
	k.start(t, c, k.l.handle, true)
	k.settle(t, sent)
	if n := sum(failed, c); n != 1 {
		t.Errorf("failed %d, want 1", n)
	}
	if k.Batched != nil && k.Batched() == 0 {
		t.Error("no delivery held more than one message")
	}
}

// drain drains a consumer while its handler runs: the drain waits for the
// handler, which completes, and a second consumer of the group takes the
// rest; nothing is lost or doubled.
func drain(t *testing.T, k *kase) {
	sent := keys(t, 10)
	slow := sent[0]
	running, release := make(chan struct{}), make(chan struct{})
	// The first run of slow blocks, whenever it comes: a client may
	// deliver it before Send returns. Its redeliveries, after the drain,
	// do not.
	var ran atomic.Bool
	h := func(ctx context.Context, m *consumer.Message) error {
		if msgkey.Of(m) == slow && ran.CompareAndSwap(false, true) {
			close(running)
			<-release
		}
		return k.l.handle(ctx, m)
	}
	first := k.consumer(t)
	stop := k.Start(t, first, h, false)
	k.Send(t, slow)
	select {
	case <-running:
	case <-time.After(time.Minute):
		t.Fatal("the slow message never ran")
	}
	k.Send(t, sent[1:]...)
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		drained <- stop(ctx)
	}()
	select {
	case err := <-drained:
		t.Fatalf("drained (%v) while a handler ran", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-drained; err != nil {
		t.Errorf("drain: %v", err)
	}
	if n := k.l.counts()[slow]; n != 1 {
		t.Errorf("the running message applied %d times by the drained consumer, want 1", n)
	}
	second := k.consumer(t)
	k.start(t, second, h, false)
	k.settle(t, sent)
	if n := sum(failed, first, second); n != 0 {
		t.Errorf("failed %d, want 0", n)
	}
}
