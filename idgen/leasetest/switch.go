package leasetest

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

// switcher is a generator whose clock the test steps back, so that the
// SwitchWorker policy moves it to a fresh node, leasing its nodes through a
// gate around the leaser under test.
type switcher struct {
	s     *suite
	p     Pool
	l     idgen.Leaser // the leaser under test, past the gate
	gate  *gate
	clock *testkit.Clock
	g     *idgen.Generator
	ids   []idgen.ID
}

// switchEpoch is where the switchers' clocks start: a whole second, so that
// every mark the tests compare is one any store keeps exactly.
var switchEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// switcher returns a switcher over a new pool of size nodes, its first ID
// issued.
func (s *suite) switcher(size int64) *switcher {
	s.Helper()
	p, l := s.pool(size)
	w := &switcher{s: s, p: p, l: l, gate: newGate(l), clock: testkit.NewClock(switchEpoch, 0)}
	g, err := idgen.NewLeased(s.Context(), w.gate, idgen.Config{Clock: w.clock, Rollback: idgen.SwitchWorker{}},
		idgen.LeaseConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		s.Fatalf("NewLeased: %v", err)
	}
	w.g = g
	// Cleanups run last first: held calls go on, then the generator
	// closes.
	s.Cleanup(func() { g.Close() })
	s.Cleanup(w.gate.letAll)
	w.next()
	return w
}

// next issues an ID, which must succeed.
func (w *switcher) next() idgen.ID {
	w.s.Helper()
	id, err := w.g.Next(w.s.Context())
	if err != nil {
		w.s.Fatalf("Next: %v", err)
	}
	w.ids = append(w.ids, id)
	return id
}

type result struct {
	id  idgen.ID
	err error
}

// goNext issues an ID in a goroutine.
func (w *switcher) goNext(ctx context.Context) <-chan result {
	c := make(chan result, 1)
	go func() {
		id, err := w.g.Next(ctx)
		c <- result{id, err}
	}()
	return c
}

// await waits for a call the test held, failing if switched, the call
// that should make it, returns first.
func (w *switcher) await(h *hold, method string, switched <-chan result) {
	w.s.Helper()
	select {
	case <-h.reached:
	case r := <-switched:
		w.s.Fatalf("Next after the clock stepped back returned %v before the switch called %s", r.err, method)
	}
}

// collect waits for c and records its ID; it must succeed.
func (w *switcher) collect(what string, c <-chan result) idgen.ID {
	w.s.Helper()
	r := <-c
	if r.err != nil {
		w.s.Fatalf("%s: %v", what, r.err)
	}
	w.ids = append(w.ids, r.id)
	return r.id
}

// mark returns the mark that covers id exactly: the end of its tick.
func (w *switcher) mark(id idgen.ID) time.Time {
	l := w.g.Config().Layout
	return l.Decode(id).Time.Add(l.Unit)
}

// close closes the generator and checks what it left in the pool: every
// node free, no lease released or renewed after it was lost, and no ID
// issued twice. It returns the lease the pool grants next for each node.
func (w *switcher) close() map[int64]idgen.Lease {
	w.s.Helper()
	if err := w.g.Close(); err != nil {
		w.s.Fatalf("Close: %v", err)
	}
	if lost := w.gate.lostCalls(); len(lost) > 0 {
		w.s.Errorf("%d calls found their lease lost, first %v: a lease released twice, or renewed after its release", len(lost), lost[0])
	}
	seen := map[idgen.ID]bool{}
	for _, id := range w.ids {
		if seen[id] {
			w.s.Errorf("ID %v issued twice", w.g.Config().Layout.Decode(id))
		}
		seen[id] = true
	}
	free := map[int64]idgen.Lease{}
	for range w.p.Size {
		lease, err := w.l.Acquire(w.s.Context(), all(w.p, "after"))
		if errors.Is(err, idgen.ErrNoFreeNode) {
			w.s.Fatalf("after Close the pool granted %d of its %d nodes: a lease leaked", len(free), w.p.Size)
		}
		if err != nil {
			w.s.Fatalf("Acquire after Close: %v", err)
		}
		free[lease.Node] = lease
	}
	return free
}

// testSwitch holds a switch of nodes in each of its calls to the store in
// turn (the fresh node's Acquire, the fresh lease's first Renew, the old
// lease's Release) while other callers issue IDs. A caller whose context is
// done must wait for the switch, or get an ID, never fail; callers that
// wait get an ID once the switch is done; and one switch leases exactly one
// node.
func testSwitch(s *suite) {
	w := s.switcher(5)
	for _, method := range []string{"Renew", "Release", "Acquire"} {
		from, granted := w.g.Node(), w.gate.grants()
		w.clock.Add(-time.Second)
		h := w.gate.hold(method)
		switched := w.goNext(s.Context())
		w.await(h, method, switched)

		done, cancel := context.WithCancel(s.Context())
		cancel()
		if id, err := w.g.Next(done); err == nil {
			w.ids = append(w.ids, id)
		} else if !errors.Is(err, context.Canceled) {
			s.Fatalf("Next while the switch from node %d waits in %s: %v; want it to wait for the switch, or an ID", from, method, err)
		}
		var waiting []<-chan result
		for range 4 {
			waiting = append(waiting, w.goNext(s.Context()))
		}
		h.let()
		id := w.collect("Next that switched", switched)
		for _, c := range waiting {
			w.collect("Next during the switch", c)
		}
		if n := w.g.Config().Layout.Decode(id).Node; n == from || n != w.g.Node() {
			s.Fatalf("switch held in %s: from node %d to %d, the generator on node %d", method, from, n, w.g.Node())
		}
		if n := w.gate.grants() - granted; n != 1 {
			s.Fatalf("switch held in %s leased %d nodes, want 1", method, n)
		}
	}
	w.close()
}

// errLostReply is the fault testSwitchRenewalFails injects.
var errLostReply = errors.New("leasetest: reply lost")

// testSwitchRenewalFails fails the fresh lease's first renewal after the
// store made it, as when the reply is lost: the switch fails, the fresh
// node goes back to the pool, and the generator keeps the node it holds,
// which Close releases with the mark of its last ID.
func testSwitchRenewalFails(s *suite) {
	w := s.switcher(3)
	from := w.g.Node()
	w.clock.Add(-time.Second)
	w.gate.fail("Renew", errLostReply)
	if _, err := w.g.Next(s.Context()); !errors.Is(err, errLostReply) {
		s.Fatalf("Next with the fresh lease's renewal failing: %v, want %v", err, errLostReply)
	}
	if n := w.g.Node(); n != from {
		s.Fatalf("after a failed switch the generator is on node %d, want node %d, which it holds", n, from)
	}
	w.clock.Add(time.Second)
	last := w.next()
	if n := w.g.Config().Layout.Decode(last).Node; n != from {
		s.Fatalf("after a failed switch the generator issued with node %d, want node %d", n, from)
	}
	free := w.close()
	s.wantMark("node released by Close", free[from].HighWater, w.mark(last))
}

// testSwitchClose closes the generator while a switch waits for the fresh
// lease's renewal. Close waits for the switch, which fails with ErrClosed
// and gives the fresh node back; Close releases the old node with the mark
// of its last ID.
func testSwitchClose(s *suite) {
	w := s.switcher(3)
	from, last := w.g.Node(), w.ids[0]
	w.clock.Add(-time.Second)
	h := w.gate.hold("Renew")
	switched := w.goNext(s.Context())
	w.await(h, "Renew", switched)
	closed := make(chan error, 1)
	go func() { closed <- w.g.Close() }()
	done, cancel := context.WithCancel(s.Context())
	cancel()
	testkit.WaitFor(s.T, "Close to stop Next", func() bool {
		_, err := w.g.Next(done)
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, idgen.ErrClosed) {
			s.Fatalf("Next while a switch waits and Close runs: %v; want it to wait, or ErrClosed", err)
		}
		return errors.Is(err, idgen.ErrClosed)
	})
	h.let()
	if r := <-switched; !errors.Is(r.err, idgen.ErrClosed) {
		s.Fatalf("Next whose switch Close interrupted: %v, want ErrClosed", r.err)
	}
	if err := <-closed; err != nil {
		s.Fatalf("Close during a switch: %v", err)
	}
	free := w.close()
	s.wantMark("old node released by Close", free[from].HighWater, w.mark(last))
}
