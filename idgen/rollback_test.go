package idgen_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
)

func TestRefuse(t *testing.T) {
	for _, policy := range []idgen.RollbackPolicy{nil, idgen.Refuse{}} {
		clock := newFakeClock(t0, 0)
		g := newGen(t, 0, idgen.Config{Clock: clock, Rollback: policy})
		first := next(t, g)
		clock.Add(-5 * time.Millisecond)
		if _, err := g.NextID(); !errors.Is(err, idgen.ErrClockBackwards) {
			t.Fatalf("%T: Next behind: %v", policy, err)
		}
		if got := g.Ahead(); got != 5*time.Millisecond {
			t.Fatalf("Ahead %v, want 5ms", got)
		}
		clock.Set(t0) // caught up: the same tick goes on
		if id := next(t, g); id != first+1 {
			t.Fatalf("%T: after catching up: %d, want %d", policy, id, first+1)
		}
	}
}

func TestWait(t *testing.T) {
	wait := idgen.Wait{Max: 15 * time.Millisecond}
	t.Run("within bound", func(t *testing.T) {
		clock := newRunningClock(t0)
		g := newGen(t, 0, idgen.Config{Clock: clock, Rollback: wait})
		first := next(t, g)
		clock.Add(-10 * time.Millisecond)
		if id := next(t, g); id <= first {
			t.Fatalf("after waiting: %d, not after %d", id, first)
		}
		if clock.Now().Before(t0) {
			t.Fatal("Next returned before the clock caught up")
		}
	})
	t.Run("beyond bound", func(t *testing.T) {
		clock := newFakeClock(t0, 0)
		g := newGen(t, 0, idgen.Config{Clock: clock, Rollback: wait})
		next(t, g)
		clock.Add(-20 * time.Millisecond)
		if _, err := g.NextID(); !errors.Is(err, idgen.ErrClockBackwards) {
			t.Fatalf("Next 20ms behind: %v", err)
		}
	})
	t.Run("context", func(t *testing.T) {
		clock := newFakeClock(t0, 0)
		g := newGen(t, 0, idgen.Config{Clock: clock, Rollback: idgen.Wait{Max: time.Hour}})
		next(t, g)
		clock.Add(-time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		if _, err := g.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next: %v, want deadline exceeded", err)
		}
	})
}

func TestBumpGeneration(t *testing.T) {
	clock := newFakeClock(t0, 0)
	g := newGen(t, 77, idgen.Config{Layout: idgen.RollbackBits, Clock: clock, Rollback: idgen.BumpGeneration{}})
	var ids []idgen.ID
	issue := func(wantGen int64) {
		t.Helper()
		id := next(t, g)
		p := g.Decode(id)
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
	if _, err := g.NextID(); !errors.Is(err, idgen.ErrClockBackwards) {
		t.Fatalf("Next with no generation left: %v", err)
	}
	// Forward again, generation 3 goes on.
	clock.Set(t0.Add(time.Millisecond))
	issue(3)
	// Generation 0 holds IDs up to t0, generation 1 only up to t0-1s: a
	// step back to t0-500ms takes generation 1.
	clock.Set(t0.Add(-500 * time.Millisecond))
	issue(1)
	checkUnique(t, ids)
}

func TestBumpGenerationElse(t *testing.T) {
	clock := newFakeClock(t0, 0)
	policy := idgen.BumpGeneration{Else: idgen.Wait{Max: time.Hour}}
	g := newGen(t, 0, idgen.Config{Layout: idgen.RollbackBits, Clock: clock, Rollback: policy})
	next(t, g)
	for range 3 {
		clock.Add(-time.Second)
		next(t, g)
	}
	clock.Add(-time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := g.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with no generation left under Wait: %v", err)
	}
}

func TestBorrow(t *testing.T) {
	clock := newFakeClock(t0, 0)
	g := newGen(t, 0, idgen.Config{Clock: clock, Rollback: idgen.Borrow{MaxAhead: 100 * time.Millisecond}})
	// With the clock standing still a full sequence moves on to the next
	// tick at once.
	ids := make([]idgen.ID, 3*4096)
	if _, err := g.Fill(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	checkIncreasing(t, ids)
	if last := g.Decode(ids[len(ids)-1]); !last.Time.Equal(t0.Add(2 * time.Millisecond)) {
		t.Fatalf("last ID at %v, want t0+2ms", last.Time)
	}
	if got := g.Ahead(); got != 2*time.Millisecond {
		t.Fatalf("Ahead %v, want 2ms", got)
	}
	// A step back within MaxAhead: the logical clock does not follow.
	clock.Add(-50 * time.Millisecond)
	id := next(t, g)
	if id <= ids[len(ids)-1] {
		t.Fatalf("after a step back: %d, not after %d", id, ids[len(ids)-1])
	}
	// The tick at t0+2ms was full, so that ID took t0+3ms.
	if got := g.Ahead(); got != 53*time.Millisecond {
		t.Fatalf("Ahead %v, want 53ms", got)
	}
	// Beyond MaxAhead it refuses (no Else).
	clock.Add(-time.Second)
	if _, err := g.NextID(); !errors.Is(err, idgen.ErrClockBackwards) {
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

// pool is a WorkerSource handing out node ids from a list.
type pool struct {
	mu      sync.Mutex
	ids     []int64
	err     error
	retired []int64
	until   []time.Time
}

func (p *pool) NextWorker(_ context.Context, retired int64, lastUsed time.Time) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, p.err
	}
	if len(p.ids) == 0 {
		return 0, errors.New("pool empty")
	}
	id := p.ids[0]
	p.ids = p.ids[1:]
	p.retired = append(p.retired, retired)
	p.until = append(p.until, lastUsed)
	return id, nil
}

func TestSwitchWorker(t *testing.T) {
	clock := newFakeClock(t0, 0)
	src := &pool{ids: []int64{5, 1, 5000, 6}}
	g := newGen(t, 1, idgen.Config{Clock: clock, Rollback: idgen.SwitchWorker{Source: src}})
	ids := []idgen.ID{next(t, g)}
	clock.Add(-time.Second)
	id := next(t, g)
	if p := g.Decode(id); p.Node != 5 || !p.Time.Equal(t0.Add(-time.Second)) || g.Node() != 5 {
		t.Fatalf("after switching: %+v, generator node %d", p, g.Node())
	}
	if src.retired[0] != 1 || !src.until[0].Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("retired %v until %v", src.retired, src.until)
	}
	ids = append(ids, id, next(t, g))

	// Node 1 issued IDs at t0, after the clock: refused, as is 5000,
	// out of range; the source error comes back.
	clock.Add(-time.Second)
	if _, err := g.NextID(); !errors.Is(err, idgen.ErrClockBackwards) {
		t.Fatalf("switch back to node 1: %v", err)
	}
	if _, err := g.NextID(); !errors.Is(err, idgen.ErrNodeRange) {
		t.Fatalf("switch to node 5000: %v", err)
	}
	src.err = errors.New("redis down")
	if _, err := g.NextID(); !errors.Is(err, src.err) {
		t.Fatalf("source failing: %v", err)
	}
	src.err = nil
	ids = append(ids, next(t, g))
	if g.Node() != 6 {
		t.Fatalf("node %d, want 6", g.Node())
	}
	checkUnique(t, ids)
}

// Seed 000: wait out small steps back, switch worker ids on large ones.
func TestWaitElseSwitchWorker(t *testing.T) {
	clock := newRunningClock(t0)
	src := &pool{ids: []int64{9}}
	policy := idgen.Wait{Max: 15 * time.Millisecond, Else: idgen.SwitchWorker{Source: src}}
	g := newGen(t, 3, idgen.Config{Layout: idgen.Twitter, Clock: clock, Rollback: policy})
	ids := []idgen.ID{next(t, g)}
	clock.Add(-10 * time.Millisecond)
	ids = append(ids, next(t, g))
	if g.Node() != 3 {
		t.Fatalf("switched on a 10ms step back")
	}
	clock.Add(-time.Minute)
	ids = append(ids, next(t, g))
	if g.Node() != 9 {
		t.Fatalf("node %d after a 1 minute step back, want 9", g.Node())
	}
	checkUnique(t, ids)
}

// gateClock is a clock whose next reading, once armed, blocks until
// released: it holds one caller between its clock read and its
// compare-and-swap.
type gateClock struct {
	fakeClock
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (c *gateClock) UnixNano() int64 {
	v := c.fakeClock.UnixNano()
	if c.armed.CompareAndSwap(true, false) {
		close(c.reached)
		<-c.release
	}
	return v
}

// blockingSource is a WorkerSource that lets a held caller go on while it
// decides, as a slow network round trip would.
type blockingSource struct {
	pool
	during func()
}

func (s *blockingSource) NextWorker(ctx context.Context, retired int64, lastUsed time.Time) (int64, error) {
	s.during()
	return s.pool.NextWorker(ctx, retired, lastUsed)
}

// A caller that read the clock before the rollback must not issue an ID
// with the old node after the last use reported to the source: another
// generator may take that node from the source and issue the same IDs.
func TestSwitchWorkerReportsTheLastUse(t *testing.T) {
	clock := &gateClock{reached: make(chan struct{}), release: make(chan struct{})}
	clock.Set(t0)
	src := &blockingSource{pool: pool{ids: []int64{2}}}
	g := newGen(t, 1, idgen.Config{Clock: clock, Rollback: idgen.SwitchWorker{Source: src}})
	next(t, g)

	// The held caller reads the clock 5ms ahead of the last ID.
	clock.Add(5 * time.Millisecond)
	clock.armed.Store(true)
	held := make(chan idgen.ID)
	go func() { held <- next(t, g) }()
	<-clock.reached

	// Now the clock steps back and another caller switches workers; the
	// held caller goes on while the source decides.
	clock.Add(-time.Second)
	src.during = func() {
		close(clock.release)
		time.Sleep(20 * time.Millisecond)
	}
	switched := next(t, g)
	heldID := <-held

	lastUsed := src.until[0]
	for _, id := range []idgen.ID{heldID, switched} {
		if p := g.Decode(id); p.Node == 1 && !p.Time.Before(lastUsed) {
			t.Fatalf("ID %v issued with retired node 1 at or after the last use %v reported to the source", p, lastUsed)
		}
	}
	checkUnique(t, []idgen.ID{heldID, switched})
}
