package cached_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/cached"
	"github.com/idemq/idemq/internal/testkit"
)

// cachedLayout has 16 IDs per tick, so that a test exhausts what a clock
// standing still allows in a few dozen takes.
var cachedLayout = idgen.Layout{
	Name: "cached-test", TimeBits: 41, WorkerBits: 4, SequenceBits: 4,
	Unit: time.Millisecond, Epoch: idgen.Twitter.Epoch,
}

// newCached returns a Cached generator on a new static generator with cfg,
// closed at the end of the test.
func newCached(t *testing.T, cfg idgen.Config, ccfg cached.Config) *cached.Generator {
	t.Helper()
	g, err := idgen.New(1, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c, err := cached.New(context.Background(), g, ccfg)
	if err != nil {
		g.Close()
		t.Fatalf("cached.New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestCachedInvalidConfig(t *testing.T) {
	borrow := idgen.Config{Layout: cachedLayout, Rollback: idgen.Borrow{MaxAhead: 4 * time.Millisecond}}
	short := borrow
	short.Rollback = idgen.Borrow{MaxAhead: 3 * time.Millisecond} // 64 slots span 4 ticks
	refuse := idgen.Config{Layout: cachedLayout}
	past30 := int64(1) << 31 // a variable, so that a 32-bit build compiles
	for _, tc := range []struct {
		name string
		gen  idgen.Config
		cfg  cached.Config
	}{
		{"size not a power of two", borrow, cached.Config{Size: 48}},
		{"size one", borrow, cached.Config{Size: 1}},
		{"negative size", borrow, cached.Config{Size: -64}},
		{"size past 2^30", borrow, cached.Config{Size: int(past30)}},
		{"percent above 100", borrow, cached.Config{Size: 64, PaddingPercent: 101}},
		{"negative percent", borrow, cached.Config{Size: 64, PaddingPercent: -1}},
		{"negative interval", borrow, cached.Config{Size: 64, PaddingInterval: -time.Second}},
		{"no Borrow", refuse, cached.Config{Size: 64}},
		{"MaxAhead shorter than a buffer", short, cached.Config{Size: 64}},
		{"MaxAhead shorter than the default buffer", borrow, cached.Config{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := testkit.Generator(t, 1, tc.gen)
			if _, err := cached.New(context.Background(), g, tc.cfg); !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
			// A refused generator is still the caller's, and open.
			testkit.Next(t, g)
		})
	}
	t.Run("nil generator", func(t *testing.T) {
		if _, err := cached.New(context.Background(), nil, cached.Config{}); !errors.Is(err, idgen.ErrInvalidConfig) {
			t.Fatalf("New: %v, want ErrInvalidConfig", err)
		}
	})
}

func TestCachedDefaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		layout   idgen.Layout
		maxAhead time.Duration
		size     int
	}{
		{"twitter", idgen.Twitter, 8 * time.Millisecond, 4096 << 3},
		{"test layout", cachedLayout, 8 * time.Millisecond, 16 << 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCached(t, idgen.Config{Layout: tc.layout, Rollback: idgen.Borrow{MaxAhead: tc.maxAhead}}, cached.Config{})
			if s := c.Stats(); s.Size != tc.size || s.Buffered != tc.size {
				t.Fatalf("Stats %+v: want size %d, full", s, tc.size)
			}
			id, err := c.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if p := tc.layout.Decode(id); p.Node != 1 {
				t.Fatalf("Decode(%d) = %+v, want node 1", id, p)
			}
		})
	}
}

func TestCachedConcurrent(t *testing.T) {
	layout := cachedLayout
	layout.SequenceBits = 10 // a million IDs a second on the real clock
	for _, tc := range []struct {
		name       string
		size       int
		goroutines int
		each       int
		failEmpty  bool
	}{
		{"tiny ring wraps", 16, 8, 4000, false},
		{"small ring", 1024, 4, 10000, false},
		{"default ring", 0, 8, 10000, false},
		{"fail when empty", 256, 8, 4000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCached(t, idgen.Config{Layout: layout, Rollback: idgen.Borrow{MaxAhead: 10 * time.Millisecond}},
				cached.Config{Size: tc.size, FailWhenEmpty: tc.failEmpty})
			got := make([][]idgen.ID, tc.goroutines)
			var wg sync.WaitGroup
			for i := range got {
				wg.Go(func() {
					ids := make([]idgen.ID, 0, tc.each)
					for len(ids) < tc.each {
						id, err := c.Next(context.Background())
						if errors.Is(err, cached.ErrBufferEmpty) && tc.failEmpty {
							continue
						}
						if err != nil {
							t.Errorf("Next: %v", err)
							return
						}
						ids = append(ids, id)
					}
					got[i] = ids
				})
			}
			wg.Wait()
			var all []idgen.ID
			for _, ids := range got {
				testkit.CheckIncreasing(t, ids)
				all = append(all, ids...)
			}
			testkit.CheckUnique(t, all)
			if s := c.Stats(); s.Taken != int64(tc.goroutines*tc.each) {
				t.Fatalf("Stats().Taken %d, want %d", s.Taken, tc.goroutines*tc.each)
			}
		})
	}
}

// frozenCached returns a Cached generator of 64 slots over cachedLayout on a
// clock that stands still at t0, borrowing at most 4 ticks: it can hand out
// 5 ticks' worth of IDs, 80, before the clock must move.
func frozenCached(t *testing.T, failEmpty bool) (*cached.Generator, *testkit.Clock) {
	t.Helper()
	clock := testkit.NewClock(t0, 0)
	c := newCached(t, idgen.Config{Layout: cachedLayout, Clock: clock, Rollback: idgen.Borrow{MaxAhead: 4 * time.Millisecond}},
		cached.Config{Size: 64, FailWhenEmpty: failEmpty})
	return c, clock
}

const frozenCapacity = 5 * 16

func TestCachedWaitWhenEmpty(t *testing.T) {
	c, clock := frozenCached(t, false)
	var ids []idgen.ID
	for range frozenCapacity {
		ids = append(ids, testkit.Next(t, c))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if id, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty buffer, clock still: %d, %v; want the context's deadline", id, err)
	}
	if s := c.Stats(); s.Empty == 0 || s.Buffered != 0 || s.Ahead != 4*time.Millisecond {
		t.Fatalf("Stats %+v: want an empty take counted, nothing buffered, 4ms ahead", s)
	}
	// A caller waiting when the clock moves gets an ID once padded.
	res := make(chan error, 1)
	go func() {
		id, err := c.Next(context.Background())
		ids = append(ids, id)
		res <- err
	}()
	clock.Add(cachedLayout.Unit)
	if err := <-res; err != nil {
		t.Fatalf("Next after the clock moved: %v", err)
	}
	testkit.CheckIncreasing(t, ids)
	if got := cachedLayout.Decode(ids[len(ids)-1]).Time; !got.Equal(t0.Add(5 * time.Millisecond)) {
		t.Fatalf("ID after the wait has time %v, want the clock plus MaxAhead %v", got, t0.Add(5*time.Millisecond))
	}
}

func TestCachedFailWhenEmpty(t *testing.T) {
	c, clock := frozenCached(t, true)
	var ids []idgen.ID
	for {
		id, err := c.Next(context.Background())
		if errors.Is(err, cached.ErrBufferEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if len(ids) > frozenCapacity {
			t.Fatalf("%d IDs taken on a clock standing still, at most %d possible", len(ids), frozenCapacity)
		}
	}
	clock.Add(cachedLayout.Unit)
	var id idgen.ID
	testkit.WaitFor(t, "an ID once the clock moved", func() bool {
		var err error
		id, err = c.Next(context.Background())
		if err != nil && !errors.Is(err, cached.ErrBufferEmpty) {
			t.Fatal(err)
		}
		return err == nil
	})
	testkit.CheckIncreasing(t, append(ids, id))
}

// TestCachedPadderError: a generator that cannot issue IDs fails Next with
// its error instead of leaving it waiting.
func TestCachedPadderError(t *testing.T) {
	t.Run("wait", func(t *testing.T) {
		c, clock := frozenCached(t, false)
		clock.Add(-time.Hour) // past Borrow's MaxAhead, to its Else: Refuse
		var err error
		for range frozenCapacity + 1 {
			if _, err = c.Next(context.Background()); err != nil {
				break
			}
		}
		if !errors.Is(err, idgen.ErrClockBackwards) {
			t.Fatalf("Next with the clock an hour back: %v, want ErrClockBackwards", err)
		}
	})
	t.Run("fail", func(t *testing.T) {
		c, clock := frozenCached(t, true)
		clock.Add(-time.Hour)
		testkit.WaitFor(t, "the padding's error", func() bool {
			_, err := c.Next(context.Background())
			if err != nil && !errors.Is(err, cached.ErrBufferEmpty) {
				t.Fatalf("Next: %v, want ErrBufferEmpty", err)
			}
			return errors.Is(err, idgen.ErrClockBackwards)
		})
	})
}

func TestCachedPadding(t *testing.T) {
	cfg := idgen.Config{Layout: cachedLayout, Rollback: idgen.Borrow{MaxAhead: 10 * time.Millisecond}}
	for _, tc := range []struct {
		name string
		cfg  cached.Config
		take int
	}{
		// 40 takes leave 24 of 64, under half.
		{"threshold", cached.Config{Size: 64}, 40},
		// 10 takes leave 54, over the 1% threshold: only the schedule
		// refills.
		{"scheduled", cached.Config{Size: 64, PaddingPercent: 1, PaddingInterval: time.Millisecond}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCached(t, cfg, tc.cfg)
			before := c.Stats()
			for range tc.take {
				testkit.Next(t, c)
			}
			// A padding tops the buffer up to full; takes after it
			// (but not under the threshold again) leave it short.
			testkit.WaitFor(t, "a padding", func() bool {
				s := c.Stats()
				return s.Buffered > s.Size-tc.take && s.Pads > before.Pads
			})
		})
	}
}

func TestCachedClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	clock := testkit.NewClock(t0, 0)
	g, err := idgen.New(1, idgen.Config{Layout: cachedLayout, Clock: clock, Rollback: idgen.Borrow{MaxAhead: 4 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cached.New(context.Background(), g, cached.Config{Size: 64, PaddingInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for range frozenCapacity {
		if _, err := c.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// One caller waits on the empty buffer, the padder on the clock.
	res := make(chan error, 1)
	go func() {
		_, err := c.Next(context.Background())
		res <- err
	}()
	testkit.WaitFor(t, "a caller waiting", func() bool { return c.Stats().Empty > 0 })
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-res; !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("waiting Next at Close: %v, want ErrClosed", err)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if _, err := g.Next(context.Background()); !errors.Is(err, idgen.ErrClosed) {
		t.Fatalf("the generator's Next after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCachedRestart: IDs padded and never taken are lost at Close, but a
// restart on the same high-water store or lease pool starts after all of
// them, borrowed time included; and the mark stored before Close already
// covers them, for a process killed instead of closed.
func TestCachedRestart(t *testing.T) {
	const (
		maxAhead = 700 * time.Millisecond // inside a 1s lease's 800ms window
		takes    = 16 * 500               // 500 ticks' worth: the padding runs about 500ms ahead
	)
	type run struct {
		gen   *idgen.Generator
		mark  func() time.Time // the mark stored now
		close func()           // after the generator's Close
	}
	dir := t.TempDir()
	pool := newMarkLeaser(t, 1, time.Second)
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, cfg idgen.Config) run
	}{
		{"file store", func(t *testing.T, cfg idgen.Config) run {
			store, err := idgen.OpenFileStore(filepath.Join(dir, "node1"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Store, cfg.Reserve = store, cfg.Layout.Unit // a mark one tick ahead at most
			g, err := idgen.New(1, cfg)
			if err != nil {
				t.Fatal(err)
			}
			mark := func() time.Time {
				m, err := store.Load(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			return run{g, mark, func() { store.Close() }}
		}},
		{"lease", func(t *testing.T, cfg idgen.Config) run {
			g, err := idgen.NewLeased(context.Background(), pool, cfg, idgen.LeaseConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			return run{g, func() time.Time { return pool.mark(0) }, func() {}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(t0, 0)
			cfg := idgen.Config{Layout: cachedLayout, Clock: clock, Rollback: idgen.Borrow{MaxAhead: maxAhead}}
			first := tc.start(t, cfg)
			c, err := cached.New(context.Background(), first.gen, cached.Config{Size: 64})
			if err != nil {
				t.Fatal(err)
			}
			var taken []idgen.ID
			for range takes {
				taken = append(taken, testkit.Next(t, c))
			}
			testkit.WaitFor(t, "IDs buffered", func() bool { return c.Stats().Buffered > 0 })
			s := c.Stats()
			if s.Ahead < takes/16*cachedLayout.Unit {
				t.Fatalf("Stats %+v: the padding did not run ahead of the clock", s)
			}
			last := slices.Max(taken)
			if s.Newest <= last {
				t.Fatalf("Stats().Newest %d is not above the last ID taken %d: nothing left buffered", s.Newest, last)
			}
			end := cachedLayout.Decode(s.Newest).Time.Add(cachedLayout.Unit)
			if m := first.mark(); m.Before(end) {
				t.Fatalf("stored mark %v before the end %v of the newest ID padded, %v ahead of the clock", m, end, s.Ahead)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			first.close()

			// The restart's clock has moved on, but stands behind the IDs
			// the first run padded.
			clock.Add(s.Ahead / 2)
			second := tc.start(t, cfg)
			c2, err := cached.New(context.Background(), second.gen, cached.Config{Size: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer second.close()
			defer c2.Close()
			for range 200 {
				if id := testkit.Next(t, c2); id <= s.Newest {
					t.Fatalf("after the restart ID %d, not above %d, the newest the first run padded", id, s.Newest)
				}
			}
		})
	}
}
