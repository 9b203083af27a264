package idgen_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/testkit"
)

// TestRollbackRefused: a step back past what the policy covers fails Next
// with ErrClockBackwards, or waits until the caller's context ends; the
// generator is as it was, and goes on in the same tick once the clock has
// caught up.
func TestRollbackRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   idgen.Config
		bumps int           // steps back of a second first, each covered
		back  time.Duration // the step back that is not
		want  error
	}{
		{"Refuse", idgen.Config{}, 0, 5 * time.Millisecond, idgen.ErrClockBackwards},
		{"WaitBeyondMax", idgen.Config{Rollback: idgen.Wait{Max: 15 * time.Millisecond}}, 0, 20 * time.Millisecond, idgen.ErrClockBackwards},
		{"WaitContext", idgen.Config{Rollback: idgen.Wait{Max: time.Hour}}, 0, time.Minute, context.DeadlineExceeded},
		{"BumpGenerationElseWait", idgen.Config{Layout: idgen.RollbackBits, Rollback: idgen.BumpGeneration{Else: idgen.Wait{Max: time.Hour}}}, 3, time.Second, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(t0, 0)
			tc.cfg.Clock = clock
			g := testkit.Generator(t, 0, tc.cfg)
			first := testkit.Next(t, g)
			for range tc.bumps {
				clock.Add(-time.Second)
				testkit.Next(t, g)
			}
			clock.Add(-tc.back)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			if _, err := g.Next(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("Next %v behind: %v, want %v", tc.back, err, tc.want)
			}
			if tc.bumps > 0 {
				return
			}
			if got := g.Ahead(); got != tc.back {
				t.Fatalf("Ahead %v, want %v", got, tc.back)
			}
			clock.Set(t0)
			if id := testkit.Next(t, g); id != first+1 {
				t.Fatalf("after catching up: %d, want %d", id, first+1)
			}
		})
	}
}

// TestWaitWithinMax: Wait sleeps out a step back within its bound and
// issues after the last ID.
func TestWaitWithinMax(t *testing.T) {
	clock := testkit.NewRunningClock(t0)
	g := testkit.Generator(t, 0, idgen.Config{Clock: clock, Rollback: idgen.Wait{Max: 15 * time.Millisecond}})
	first := testkit.Next(t, g)
	clock.Add(-10 * time.Millisecond)
	if id := testkit.Next(t, g); id <= first {
		t.Fatalf("after waiting: %d, not after %d", id, first)
	}
	if clock.Now().Before(t0) {
		t.Fatal("Next returned before the clock caught up")
	}
}

func TestBumpGeneration(t *testing.T) {
	clock := testkit.NewClock(t0, 0)
	g := testkit.Generator(t, 77, idgen.Config{Layout: idgen.RollbackBits, Clock: clock, Rollback: idgen.BumpGeneration{}})
	var ids []idgen.ID
	issue := func(wantGen int64) {
		t.Helper()
		id := testkit.Next(t, g)
		p := g.Config().Layout.Decode(id)
		if p.Generation != wantGen || !p.Time.Equal(clock.Now()) || p.Node != 77 {
			t.Fatalf("at %v: decoded %+v, want generation %d", clock.Now(), p, wantGen)
		}
		ids = append(ids, id)
	}
	issue(0)
	issue(0)
	// Each step back takes the next generation, at the clock's time.
	for gen, back := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		clock.Set(t0.Add(-back))
		issue(int64(gen + 1))
		issue(int64(gen + 1))
	}
	// Every generation holds IDs at or after t0-4s: none is free.
	clock.Set(t0.Add(-4 * time.Second))
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClockBackwards) {
		t.Fatalf("Next with no generation left: %v", err)
	}
	// Forward again, generation 3 goes on.
	clock.Set(t0.Add(time.Millisecond))
	issue(3)
	// Generation 0 holds IDs up to t0, generation 1 only up to t0-1s: a
	// step back to t0-500ms takes generation 1.
	clock.Set(t0.Add(-500 * time.Millisecond))
	issue(1)
	testkit.CheckUnique(t, ids)
}

func TestBorrow(t *testing.T) {
	clock := testkit.NewClock(t0, 0)
	g := testkit.Generator(t, 0, idgen.Config{Clock: clock, Rollback: idgen.Borrow{MaxAhead: 100 * time.Millisecond}})
	// With the clock standing still a full sequence moves on to the next
	// tick at once.
	ids := make([]idgen.ID, 3*4096)
	if _, err := g.Fill(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	testkit.CheckIncreasing(t, ids)
	if last := g.Config().Layout.Decode(ids[len(ids)-1]); !last.Time.Equal(t0.Add(2 * time.Millisecond)) {
		t.Fatalf("last ID at %v, want t0+2ms", last.Time)
	}
	if got := g.Ahead(); got != 2*time.Millisecond {
		t.Fatalf("Ahead %v, want 2ms", got)
	}
	// A step back within MaxAhead: the logical clock does not follow.
	clock.Add(-50 * time.Millisecond)
	id := testkit.Next(t, g)
	if id <= ids[len(ids)-1] {
		t.Fatalf("after a step back: %d, not after %d", id, ids[len(ids)-1])
	}
	// The tick at t0+2ms was full, so that ID took t0+3ms.
	if got := g.Ahead(); got != 53*time.Millisecond {
		t.Fatalf("Ahead %v, want 53ms", got)
	}
	// Beyond MaxAhead it refuses (no Else).
	clock.Add(-time.Second)
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClockBackwards) {
		t.Fatalf("Next 1s behind: %v", err)
	}
	// At MaxAhead a full sequence waits for the clock.
	clock.Set(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	for {
		_, err := g.Fill(ctx, ids)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := g.Ahead(); got != 100*time.Millisecond {
		t.Fatalf("Ahead at the limit %v, want 100ms", got)
	}
}

// TestSwitchWorker: a leased generator switches to a fresh node at the
// clock's time; a leaser that cannot grant one fails the rollback with its
// error, and the switch succeeds once it can.
func TestSwitchWorker(t *testing.T) {
	clock := testkit.NewClock(t0, 0)
	m := newFaultLeaser(t, 4, time.Minute)
	g := leased(t, m, idgen.Config{Clock: clock, Rollback: idgen.SwitchWorker{}})
	first := g.Node()
	ids := []idgen.ID{testkit.Next(t, g)}
	clock.Add(-time.Second)
	id := testkit.Next(t, g)
	second := g.Node()
	if p := g.Config().Layout.Decode(id); p.Node == first || p.Node != second || !p.Time.Equal(t0.Add(-time.Second)) {
		t.Fatalf("after switching from node %d: %+v, generator node %d", first, p, second)
	}
	if got, ok := m.releasedMark(first); !ok || !got.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("node %d released with mark %v (%v), want the end of its last tick %v", first, got, ok, t0.Add(time.Millisecond))
	}
	ids = append(ids, id, testkit.Next(t, g))

	down := errors.New("redis down")
	m.set(func() { m.refusing = down })
	clock.Add(-time.Second)
	if _, err := g.Next(context.Background()); !errors.Is(err, down) {
		t.Fatalf("switch with the leaser failing: %v", err)
	}
	m.set(func() { m.refusing = nil })
	ids = append(ids, testkit.Next(t, g))
	if n := g.Node(); n == first || n == second {
		t.Fatalf("node %d after the second switch, want a fresh one", n)
	}
	testkit.CheckUnique(t, ids)
}

// Wait out small steps back, switch worker ids on large ones.
func TestWaitElseSwitchWorker(t *testing.T) {
	clock := testkit.NewRunningClock(t0)
	m := newFaultLeaser(t, 2, time.Minute)
	policy := idgen.Wait{Max: 15 * time.Millisecond, Else: idgen.SwitchWorker{}}
	g := leased(t, m, idgen.Config{Layout: idgen.Twitter, Clock: clock, Rollback: policy})
	first := g.Node()
	ids := []idgen.ID{testkit.Next(t, g)}
	clock.Add(-10 * time.Millisecond)
	ids = append(ids, testkit.Next(t, g))
	if g.Node() != first {
		t.Fatalf("switched on a 10ms step back")
	}
	clock.Add(-time.Minute)
	ids = append(ids, testkit.Next(t, g))
	if g.Node() == first {
		t.Fatalf("still node %d after a 1 minute step back", first)
	}
	testkit.CheckUnique(t, ids)
}

// gateClock is a clock whose next reading, once armed, blocks until
// released: it holds one caller between its clock read and its
// compare-and-swap.
type gateClock struct {
	*testkit.Clock
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (c *gateClock) UnixNano() int64 {
	v := c.Clock.UnixNano()
	if c.armed.CompareAndSwap(true, false) {
		close(c.reached)
		<-c.release
	}
	return v
}

// A caller that read the clock before the rollback must not issue an ID
// with the old node after the mark the old node is released with: the
// node's next holder starts after that mark and would issue the same IDs.
func TestSwitchWorkerReportsTheLastUse(t *testing.T) {
	clock := &gateClock{Clock: testkit.NewClock(t0, 0), reached: make(chan struct{}), release: make(chan struct{})}
	m := newFaultLeaser(t, 2, time.Minute)
	g := leased(t, m, idgen.Config{Clock: clock, Rollback: idgen.SwitchWorker{}})
	first := g.Node()
	testkit.Next(t, g)

	// The held caller reads the clock 5ms ahead of the last ID.
	clock.Add(5 * time.Millisecond)
	clock.armed.Store(true)
	held := make(chan idgen.ID)
	go func() { held <- testkit.Next(t, g) }()
	<-clock.reached

	// Now the clock steps back and another caller switches workers; the
	// held caller goes on while the leaser grants the fresh node.
	clock.Add(-time.Second)
	m.set(func() {
		m.during = func() {
			m.set(func() { m.during = nil })
			close(clock.release)
			time.Sleep(20 * time.Millisecond)
		}
	})
	switched := testkit.Next(t, g)
	heldID := <-held

	lastUsed, ok := m.releasedMark(first)
	if !ok {
		t.Fatalf("node %d not released", first)
	}
	for _, id := range []idgen.ID{heldID, switched} {
		if p := g.Config().Layout.Decode(id); p.Node == first && !p.Time.Before(lastUsed) {
			t.Fatalf("ID %v issued with retired node %d at or after the mark %v it was released with", p, first, lastUsed)
		}
	}
	testkit.CheckUnique(t, []idgen.ID{heldID, switched})
}
