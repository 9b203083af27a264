package segment_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/memidgen"
	"github.com/idemq/idemq/internal/testkit"
	"go.uber.org/goleak"
)

var errDown = errors.New("source down")

// faultySource wraps a real source, records the steps asked for and the
// segments returned, and injects faults: while down is set its calls fail,
// before reaching the source or, with after, once the source has reserved
// the segment (a lost reply); while block is set they wait for their
// context to end.
type faultySource struct {
	segment.Store
	after       bool
	down, block atomic.Bool

	mu    sync.Mutex
	steps []int64
	segs  []segment.Segment
}

func (f *faultySource) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	if f.block.Load() {
		<-ctx.Done()
		return segment.Segment{}, ctx.Err()
	}
	if f.down.Load() && !f.after {
		return segment.Segment{}, errDown
	}
	seg, err := f.Store.NextSegment(ctx, tag, step)
	if err == nil && f.down.Load() {
		err = errDown
	}
	if err == nil {
		f.mu.Lock()
		f.steps = append(f.steps, step)
		f.segs = append(f.segs, seg)
		f.mu.Unlock()
	}
	return seg, err
}

// loads returns the steps of the successful calls and their segments.
func (f *faultySource) loads() ([]int64, []segment.Segment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.steps), slices.Clone(f.segs)
}

func (f *faultySource) calls() int {
	steps, _ := f.loads()
	return len(steps)
}

// newSegSource returns a memidgen source holding tag t, wrapped.
func newSegSource(t *testing.T, tag segment.Tag) *faultySource {
	t.Helper()
	src := memidgen.NewSegments()
	if err := src.CreateTag(context.Background(), tag); err != nil {
		t.Fatal(err)
	}
	return &faultySource{Store: src}
}

func newAlloc(t *testing.T, src segment.Store, tag string, cfg segment.Config) *segment.Allocator {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	a, err := segment.New(context.Background(), src, tag, cfg)
	if err != nil {
		t.Fatalf("segment.New: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestAllocatorUnique(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		allocators, goroutines int
		perGoroutine           int
		step, maxStep          int64
		fill                   int // batch size; 0 uses Next
	}{
		{name: "next", allocators: 1, goroutines: 8, perGoroutine: 3000, step: 7, maxStep: 7},
		{name: "fill", allocators: 1, goroutines: 8, perGoroutine: 3000, step: 7, maxStep: 7, fill: 13},
		{name: "fill larger than a segment", allocators: 1, goroutines: 4, perGoroutine: 3000, step: 5, maxStep: 5, fill: 100},
		{name: "adaptive step", allocators: 1, goroutines: 8, perGoroutine: 5000, step: 3, fill: 10},
		{name: "many allocators", allocators: 4, goroutines: 8, perGoroutine: 3000, step: 5, maxStep: 5},
		{name: "many allocators fill", allocators: 3, goroutines: 6, perGoroutine: 3000, step: 11, maxStep: 11, fill: 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := newSegSource(t, segment.Tag{Tag: "orders", Step: tt.step})
			allocs := make([]*segment.Allocator, tt.allocators)
			for i := range allocs {
				allocs[i] = newAlloc(t, src, "orders", segment.Config{MaxStep: tt.maxStep})
			}
			got := make([][]int64, tt.goroutines)
			var wg sync.WaitGroup
			for g := range tt.goroutines {
				wg.Go(func() {
					a, ids := allocs[g%len(allocs)], make([]int64, tt.perGoroutine)
					for i := 0; i < len(ids); {
						if tt.fill == 0 {
							id, err := a.Next(context.Background())
							if err != nil {
								t.Errorf("Next: %v", err)
								return
							}
							ids[i] = id
							i++
							continue
						}
						n, err := a.Fill(context.Background(), ids[i:min(i+tt.fill, len(ids))])
						if err != nil {
							t.Errorf("Fill: %v", err)
							return
						}
						i += n
					}
					got[g] = ids
				})
			}
			wg.Wait()
			var all []int64
			for _, ids := range got {
				testkit.CheckIncreasing(t, ids)
				all = append(all, ids...)
			}
			testkit.CheckUnique(t, all)
			if tt.allocators == 1 {
				// Nothing is skipped: the IDs are 0 to n-1.
				slices.Sort(all)
				if all[0] != 0 || all[len(all)-1] != int64(len(all)-1) {
					t.Fatalf("%d IDs from %d to %d", len(all), all[0], all[len(all)-1])
				}
			}
			if tt.maxStep > 0 {
				var segs int64
				for _, a := range allocs {
					segs += a.Stats().Segments
				}
				if want := int64(len(all)) / tt.maxStep; segs < want {
					t.Fatalf("%d segments for %d IDs of at most %d", segs, len(all), tt.maxStep)
				}
			}
		})
	}
}

func TestAllocatorPreload(t *testing.T) {
	const step = 100
	for _, tt := range []struct {
		name      string
		preloadAt float64
		mark      int64 // the ID whose taker starts the load, counted from 1
		fill      bool  // take IDs with Fill, up to the mark and from it
	}{
		{name: "default: 90% left", mark: 11},
		{name: "half", preloadAt: 0.5, mark: 51},
		{name: "a quarter", preloadAt: 0.25, mark: 26},
		{name: "at the end", preloadAt: 1, mark: 100},
		{name: "fill", mark: 11, fill: true},
		{name: "fill at the end", preloadAt: 1, mark: 100, fill: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := newSegSource(t, segment.Tag{Tag: "t", Step: step})
			a := newAlloc(t, src, "t", segment.Config{PreloadAt: tt.preloadAt})
			next := int64(0)
			take := func(n int64) {
				t.Helper()
				ids := make([]int64, n)
				if tt.fill {
					if k, err := a.Fill(context.Background(), ids); k != len(ids) || err != nil {
						t.Fatalf("Fill = %d, %v", k, err)
					}
				} else {
					for i := range ids {
						ids[i] = testkit.Next(t, a)
					}
				}
				for _, id := range ids {
					if id != next {
						t.Fatalf("ID %d, want %d", id, next)
					}
					next++
				}
			}
			take(tt.mark - 1)
			if n := src.calls(); n != 1 {
				t.Fatalf("%d source calls before %d IDs of %d were used, want 1", n, tt.mark, step)
			}
			take(1)
			testkit.WaitFor(t, "the second segment", func() bool { n := a.Stats().Next; return n.End > n.Start })
			if st := a.Stats(); st.Next != (segment.Segment{Start: step, End: 2 * step, Step: step}) || st.Segments != 2 || st.Left != 2*step-tt.mark {
				t.Fatalf("after the load: %+v", st)
			}
			take(step - tt.mark)
			// The switch to the loaded segment calls no source.
			take(1)
			if n := src.calls(); n != 2 {
				t.Fatalf("%d source calls after the switch, want 2", n)
			}
		})
	}
}

func TestAllocatorSourceFails(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after bool // the failing calls reserve their segment
	}{
		{name: "unreachable"},
		{name: "reply lost", after: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := newSegSource(t, segment.Tag{Tag: "t", Step: 100})
			src.after = tt.after
			clock := testkit.NewClock(t0, 0)
			var logs testkit.Buffer
			a := newAlloc(t, src, "t", segment.Config{Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ctx := context.Background()
			src.down.Store(true)
			for range 11 { // the 11th starts the load
				testkit.Next(t, a)
			}
			testkit.WaitFor(t, "a failed load", func() bool { return a.Stats().LoadFailures > 0 })
			st := a.Stats()
			if !st.Failing || !errors.Is(st.LastError, errDown) || !st.LastErrorAt.Equal(t0) || st.Left != 89 {
				t.Fatalf("stats after a failed load: %+v", st)
			}
			if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, errDown.Error()) {
				t.Fatalf("log after a failed load:\n%s", l)
			}
			// The current segment still has room.
			for i := 11; i < 100; i++ {
				if id := testkit.Next(t, a); id != int64(i) {
					t.Fatalf("ID %d, want %d", id, i)
				}
			}
			// Both buffers are empty.
			_, err := a.Next(ctx)
			if !errors.Is(err, errDown) || errors.Is(err, segment.ErrMaxReached) {
				t.Fatalf("Next with no IDs left = %v, want the source's error", err)
			}
			if n, err := a.Fill(ctx, make([]int64, 5)); n != 0 || !errors.Is(err, errDown) {
				t.Fatalf("Fill with no IDs left = %d, %v", n, err)
			}
			src.down.Store(false)
			var id int64
			testkit.WaitFor(t, "a retry to succeed", func() bool {
				id, err = a.Next(ctx)
				if err != nil && !errors.Is(err, errDown) {
					t.Fatalf("Next while recovering: %v", err)
				}
				return err == nil
			})
			// A failed call that reserved its segment costs IDs, never
			// uniqueness.
			if id < 100 || (tt.after && id < 200) || (!tt.after && id != 100) {
				t.Fatalf("first ID after recovery %d", id)
			}
			if st := a.Stats(); st.Failing || !errors.Is(st.LastError, errDown) {
				t.Fatalf("stats after recovery: %+v", st)
			}
			if l := logs.String(); !strings.Contains(l, "segment loaded again") {
				t.Fatalf("log after recovery:\n%s", l)
			}
		})
	}
}

func TestAllocatorMaxReached(t *testing.T) {
	for _, tt := range []struct {
		name      string
		step, max int64
		fill      bool
	}{
		{name: "short last segment", step: 10, max: 25},
		{name: "aligned", step: 10, max: 30},
		{name: "short first segment", step: 10, max: 5},
		{name: "fill", step: 10, max: 25, fill: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := newSegSource(t, segment.Tag{Tag: "t", Step: tt.step, Max: tt.max})
			a := newAlloc(t, src, "t", segment.Config{MaxStep: tt.step})
			ctx := context.Background()
			var ids []int64
			var err error
			for err == nil && len(ids) <= int(tt.max) {
				if tt.fill {
					buf := make([]int64, 7)
					var n int
					n, err = a.Fill(ctx, buf)
					ids = append(ids, buf[:n]...)
				} else {
					var id int64
					if id, err = a.Next(ctx); err == nil {
						ids = append(ids, id)
					}
				}
			}
			if !errors.Is(err, segment.ErrMaxReached) {
				t.Fatalf("after %d IDs: %v, want ErrMaxReached", len(ids), err)
			}
			// Every reserved ID issued, none repeated, none past the
			// maximum.
			for i, id := range ids {
				if id != int64(i) {
					t.Fatalf("ID %d of %d: %d", i, len(ids), id)
				}
			}
			if len(ids) != int(tt.max) {
				t.Fatalf("%d IDs issued below a maximum of %d", len(ids), tt.max)
			}
			if _, err := a.Next(ctx); !errors.Is(err, segment.ErrMaxReached) {
				t.Fatalf("Next again = %v, want ErrMaxReached", err)
			}
			// Raising the maximum resumes the allocator.
			if err := src.Store.(*memidgen.Segments).SetMax(ctx, "t", tt.max+10); err != nil {
				t.Fatal(err)
			}
			var id int64
			testkit.WaitFor(t, "IDs under the raised maximum", func() bool {
				id, err = a.Next(ctx)
				return err == nil
			})
			if id != int64(tt.max) {
				t.Fatalf("first ID under the raised maximum %d, want %d", id, tt.max)
			}
		})
	}
}

func TestAllocatorStep(t *testing.T) {
	const m = time.Minute
	for _, tt := range []struct {
		name       string
		stored     int64
		cfg        segment.Config
		lasted     []time.Duration // how long each segment from the second on lasts
		wantSteps  []int64         // asked of the source, the first load's included
		wantLoaded []int64         // lengths of the segments loaded, if not wantSteps
	}{
		{name: "doubles up to MaxStep", stored: 10, cfg: segment.Config{MaxStep: 80},
			lasted: []time.Duration{m, m, m, m, m}, wantSteps: []int64{0, 10, 20, 40, 80, 80, 80}},
		{name: "halves down to the stored step", stored: 10, cfg: segment.Config{MaxStep: 80},
			lasted: []time.Duration{m, m, 40 * m, 40 * m, 40 * m}, wantSteps: []int64{0, 10, 20, 40, 20, 10, 10}},
		{name: "stays between the bounds", stored: 10,
			lasted: []time.Duration{m, 15 * m, 20 * m, 29 * m}, wantSteps: []int64{0, 10, 20, 20, 20, 20}},
		{name: "halves at SlowSegment", stored: 10,
			lasted: []time.Duration{m, m, 30 * m}, wantSteps: []int64{0, 10, 20, 40, 20}},
		{name: "stored step above MaxStep", stored: 50, cfg: segment.Config{MaxStep: 20},
			lasted: []time.Duration{m, m, 40 * m}, wantSteps: []int64{0, 50, 50, 50, 50}},
		{name: "configured durations", stored: 10, cfg: segment.Config{FastSegment: time.Second, SlowSegment: 2 * time.Second},
			lasted: []time.Duration{time.Second / 2, 3 * time.Second / 2, 2 * time.Second}, wantSteps: []int64{0, 10, 20, 20, 10}},
		{name: "default MaxStep", stored: 300_000,
			lasted: []time.Duration{m, m}, wantSteps: []int64{0, 300_000, 600_000, 1_000_000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := newSegSource(t, segment.Tag{Tag: "t", Step: tt.stored})
			clock := testkit.NewClock(t0, 0)
			tt.cfg.Clock = clock
			a := newAlloc(t, src, "t", tt.cfg)
			buf := make([]int64, 1_000_000)
			next := int64(0)
			// Each round uses up segment k, whose use started the load
			// of segment k+1, waits for that load, and lets the clock run
			// for as long as segment k+1 lasts before it is used.
			for k := 1; k <= len(tt.lasted)+1; k++ {
				_, segs := src.loads()
				end := int64(segs[k-1].End)
				n, err := a.Fill(context.Background(), buf[:end-next])
				if err != nil || buf[0] != next || buf[n-1] != end-1 {
					t.Fatalf("segment %d: Fill = %d IDs from %d, %v; want %d to %d", k, n, buf[0], err, next, end-1)
				}
				next = end
				testkit.WaitFor(t, "the next segment", func() bool { return src.calls() == k+1 })
				if k <= len(tt.lasted) {
					clock.Add(tt.lasted[k-1])
				}
			}
			steps, _ := src.loads()
			if !slices.Equal(steps, tt.wantSteps) {
				t.Fatalf("steps asked for %v, want %v", steps, tt.wantSteps)
			}
			if st := a.Stats().Step; st != steps[len(steps)-1] {
				t.Fatalf("Stats().Step = %d, want %d", st, steps[len(steps)-1])
			}
		})
	}
}

func TestAllocatorClose(t *testing.T) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, src *faultySource, a *segment.Allocator)
	}{
		{name: "then Next and Fill fail", run: func(t *testing.T, _ *faultySource, a *segment.Allocator) {
			testkit.Next(t, a)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Next(context.Background()); !errors.Is(err, idgen.ErrClosed) {
				t.Fatalf("Next after Close = %v, want ErrClosed", err)
			}
			if n, err := a.Fill(context.Background(), make([]int64, 3)); n != 0 || !errors.Is(err, idgen.ErrClosed) {
				t.Fatalf("Fill after Close = %d, %v, want ErrClosed", n, err)
			}
			if st := a.Stats(); st.Current != (segment.Segment{}) || st.Left != 0 {
				t.Fatalf("stats after Close: %+v", st)
			}
		}},
		{name: "while Next waits for a load", run: func(t *testing.T, src *faultySource, a *segment.Allocator) {
			src.block.Store(true)
			for range 10 {
				testkit.Next(t, a)
			}
			errc := make(chan error)
			go func() {
				_, err := a.Next(context.Background())
				errc <- err
			}()
			testkit.WaitFor(t, "Next to wait for the load", func() bool { return a.Stats().Waits == 1 })
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; !errors.Is(err, idgen.ErrClosed) {
				t.Fatalf("Next waiting at Close = %v, want ErrClosed", err)
			}
		}},
		{name: "after Next gave up waiting", run: func(t *testing.T, src *faultySource, a *segment.Allocator) {
			src.block.Store(true)
			for range 10 {
				testkit.Next(t, a)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			if _, err := a.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next waiting for a hung load = %v, want its context's error", err)
			}
			if st := a.Stats(); st.Waits != 1 || !st.Loading {
				t.Fatalf("stats after Next gave up waiting: %+v", st)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			src := newSegSource(t, segment.Tag{Tag: "t", Step: 10})
			var logs bytes.Buffer // written by the loader only, which Close waits for
			a, err := segment.New(context.Background(), src, "t", segment.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			tt.run(t, src, a)
			if err := a.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			// A load that Close cancels is no failure to warn of.
			if logs.Len() > 0 {
				t.Fatalf("Close logged:\n%s", logs.String())
			}
		})
	}
}

// scriptedSource returns its segments in turn, whatever is asked.
type scriptedSource struct {
	segment.Store // nil: the allocator only calls NextSegment
	mu            sync.Mutex
	segs          []segment.Segment
}

func (s *scriptedSource) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.segs) == 0 {
		return segment.Segment{}, errDown
	}
	seg := s.segs[0]
	s.segs = s.segs[1:]
	return seg, nil
}

func TestAllocatorBadSegment(t *testing.T) {
	for _, tt := range []struct {
		name string
		next segment.Segment // after [0, 10) of step 10
	}{
		{name: "counter went back", next: segment.Segment{Start: 5, End: 15, Step: 10}},
		{name: "longer than asked", next: segment.Segment{Start: 10, End: 30, Step: 10}},
		{name: "empty", next: segment.Segment{Start: 10, End: 10, Step: 10}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &scriptedSource{segs: []segment.Segment{{Start: 0, End: 10, Step: 10}, tt.next}}
			a := newAlloc(t, src, "t", segment.Config{})
			for i := range 10 {
				if id := testkit.Next(t, a); id != int64(i) {
					t.Fatalf("ID %d, want %d", id, i)
				}
			}
			if id, err := a.Next(context.Background()); !errors.Is(err, segment.ErrBadSegment) {
				t.Fatalf("Next after a bad segment = %d, %v, want ErrBadSegment", id, err)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  func(t *testing.T) segment.Store
		tag  string
		cfg  segment.Config
		want error
	}{
		{name: "no source", tag: "t", want: idgen.ErrInvalidConfig},
		{name: "no tag", want: idgen.ErrInvalidConfig},
		{name: "negative PreloadAt", tag: "t", cfg: segment.Config{PreloadAt: -0.1}, want: idgen.ErrInvalidConfig},
		{name: "PreloadAt over 1", tag: "t", cfg: segment.Config{PreloadAt: 1.5}, want: idgen.ErrInvalidConfig},
		{name: "PreloadAt NaN", tag: "t", cfg: segment.Config{PreloadAt: math.NaN()}, want: idgen.ErrInvalidConfig},
		{name: "negative MaxStep", tag: "t", cfg: segment.Config{MaxStep: -1}, want: idgen.ErrInvalidConfig},
		{name: "negative FastSegment", tag: "t", cfg: segment.Config{FastSegment: -time.Second}, want: idgen.ErrInvalidConfig},
		{name: "SlowSegment below FastSegment", tag: "t", cfg: segment.Config{FastSegment: time.Hour, SlowSegment: time.Minute}, want: idgen.ErrInvalidConfig},
		{name: "negative LoadTimeout", tag: "t", cfg: segment.Config{LoadTimeout: -1}, want: idgen.ErrInvalidConfig},
		{name: "unknown tag", tag: "nope", want: segment.ErrUnknownTag},
		{name: "tag at its maximum", tag: "full", want: segment.ErrMaxReached},
		{name: "source down", tag: "t", src: func(t *testing.T) segment.Store {
			src := newSegSource(t, segment.Tag{Tag: "t", Step: 10})
			src.down.Store(true)
			return src
		}, want: errDown},
		{name: "bad first segment", tag: "t", src: func(*testing.T) segment.Store {
			return &scriptedSource{segs: []segment.Segment{{Start: -5, End: 5, Step: 10}}}
		}, want: segment.ErrBadSegment},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var src segment.Store
			switch {
			case tt.src != nil:
				src = tt.src(t)
			case tt.name != "no source":
				mem := memidgen.NewSegments()
				for _, tag := range []segment.Tag{{Tag: "t", Step: 10}, {Tag: "full", MaxID: 50, Step: 10, Max: 50}} {
					if err := mem.CreateTag(context.Background(), tag); err != nil {
						t.Fatal(err)
					}
				}
				src = mem
			}
			tt.cfg.Logger = quiet
			a, err := segment.New(context.Background(), src, tt.tag, tt.cfg)
			if !errors.Is(err, tt.want) {
				if a != nil {
					a.Close()
				}
				t.Fatalf("New = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestSegmentLoadTimeout: a load that hangs ends at LoadTimeout with an
// error saying so, IDs flow meanwhile, and once the source answers again the
// loads succeed; a second hang after that times out as well.
func TestSegmentLoadTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src := newSegSource(t, segment.Tag{Tag: "t", Step: 10})
	a := newAlloc(t, src, "t", segment.Config{LoadTimeout: 50 * time.Millisecond})
	defer a.Close()
	for round := 1; round <= 2; round++ {
		base := a.Stats().LoadFailures
		src.block.Store(true)
		// Up to the preload mark and a little past it: the load hangs.
		for range 3 {
			testkit.Next(t, a)
		}
		testkit.WaitFor(t, "the hung load to time out", func() bool { return a.Stats().LoadFailures > base })
		st := a.Stats()
		if !errors.Is(st.LastError, context.DeadlineExceeded) || !strings.Contains(st.LastError.Error(), "LoadTimeout") {
			t.Fatalf("round %d: LastError = %v, want a timeout naming SegmentConfig.LoadTimeout", round, st.LastError)
		}
		src.block.Store(false)
		testkit.WaitFor(t, "a load to succeed again", func() bool { return !a.Stats().Failing && a.Stats().Next != (segment.Segment{}) })
		// Use up what is loaded, so that the next round starts a load.
		for a.Stats().Next != (segment.Segment{}) {
			testkit.Next(t, a)
		}
	}
}
