package segment_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/memidgen"
	"github.com/idemq/idemq/internal/testkit"
)

// countingSource counts the calls that reach a source.
type countingSource struct {
	segment.Store
	calls atomic.Int64
}

func (c *countingSource) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	c.calls.Add(1)
	return c.Store.NextSegment(ctx, tag, step)
}

// newBenchAlloc returns an allocator with cfg over a counting in-memory
// source whose tag "bench" has step.
func newBenchAlloc(b *testing.B, step int64, cfg segment.Config) (*segment.Allocator, *countingSource) {
	src := newBenchSource(b, step)
	cfg.Logger = quiet
	a, err := segment.New(context.Background(), src, "bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return a, src
}

func newBenchSource(b *testing.B, step int64) *countingSource {
	src := memidgen.NewSegments()
	if err := src.CreateTag(context.Background(), segment.Tag{Tag: "bench", Step: step}); err != nil {
		b.Fatal(err)
	}
	return &countingSource{Store: src}
}

// reportSegments reports the segments loaded per ID, the source calls per
// segment (a switch costs no call of its own) and the share of switches
// that waited for a load in percent.
func reportSegments(b *testing.B, a *segment.Allocator, src *countingSource) {
	st := a.Stats()
	b.ReportMetric(float64(st.Segments)/float64(b.N), "segments/op")
	b.ReportMetric(float64(src.calls.Load())/float64(st.Segments), "calls/segment")
	b.ReportMetric(100*float64(st.Waits)/float64(st.Segments), "waited-%")
}

// BenchmarkSegment compares the segment allocator with the naive way: a
// mutex-protected counter that calls the same in-memory source for every
// ID. One op is one ID. idemq-timed times one call in 64 at the default
// step; idemq-step999 keeps the step at 999 so that one
// call in 999 switches segments, times one call in 64 (999 is coprime to
// 64, so switches are sampled at their rate) and every switching call, and
// reports the 99.9th percentiles and the longest switch, each with one
// clock reading, whose median cost is reported as timer-ns.
func BenchmarkSegment(b *testing.B) {
	ctx := context.Background()
	b.Run("idemq", func(b *testing.B) {
		a, src := newBenchAlloc(b, 1000, segment.Config{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		reportSegments(b, a, src)
	})
	b.Run("idemq-fill1000", func(b *testing.B) {
		a, src := newBenchAlloc(b, 1000, segment.Config{})
		ids := make([]int64, 1000)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += len(ids) {
			if _, err := a.Fill(ctx, ids[:min(len(ids), b.N-i)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportSegments(b, a, src)
	})
	b.Run("idemq-parallel", func(b *testing.B) {
		a, src := newBenchAlloc(b, 1000, segment.Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := a.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportSegments(b, a, src)
	})
	// idemq-timed is idemq with one call in 64 timed: the default,
	// adaptive step, under which switches and preloads are a few calls
	// in a million.
	b.Run("idemq-timed", func(b *testing.B) {
		a, src := newBenchAlloc(b, 1000, segment.Config{})
		var all testkit.Latencies
		base := time.Now()
		timer := testkit.TimerCost(base)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%64 != 0 {
				if _, err := a.Next(ctx); err != nil {
					b.Fatal(err)
				}
				continue
			}
			start := time.Since(base)
			_, err := a.Next(ctx)
			all.Add(time.Since(base) - start)
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(all.Quantile(0.999)), "p99.9-ns")
		b.ReportMetric(float64(all.Max()), "max-ns")
		b.ReportMetric(float64(timer), "timer-ns")
		reportSegments(b, a, src)
	})
	b.Run("idemq-step999", func(b *testing.B) {
		const step = 999
		a, src := newBenchAlloc(b, step, segment.Config{MaxStep: step})
		var all, switches, preloads testkit.Latencies
		base := time.Now()
		timer := testkit.TimerCost(base)
		last := int64(-1)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var id int64
			var err error
			// The segment's first ID switches; its 100th starts the
			// next one's load.
			switching, preloading := (last+1)%step == 0, (last+1)%step == step/10
			if switching || preloading || i%64 == 0 {
				start := time.Since(base)
				id, err = a.Next(ctx)
				d := time.Since(base) - start
				if i%64 == 0 {
					all.Add(d)
				}
				if switching {
					switches.Add(d)
				}
				if preloading {
					preloads.Add(d)
				}
			} else {
				id, err = a.Next(ctx)
			}
			if err != nil {
				b.Fatal(err)
			}
			last = id
		}
		b.ReportMetric(float64(all.Quantile(0.999)), "p99.9-ns")
		b.ReportMetric(float64(switches.Quantile(0.999)), "switch-p99.9-ns")
		b.ReportMetric(float64(switches.Max()), "switch-max-ns")
		b.ReportMetric(float64(preloads.Quantile(0.5)), "preload-p50-ns")
		b.ReportMetric(float64(preloads.Quantile(0.999)), "preload-p99.9-ns")
		b.ReportMetric(float64(switches.Quantile(0.5)), "switch-p50-ns")
		b.ReportMetric(float64(timer), "timer-ns")
		reportSegments(b, a, src)
	})
	b.Run("naive-per-id", func(b *testing.B) {
		n := &naiveSegments{src: newBenchSource(b, 1000)}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := n.next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("naive-per-id-parallel", func(b *testing.B) {
		n := &naiveSegments{src: newBenchSource(b, 1000)}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := n.next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// naiveSegments takes every ID from the source: a segment of one.
type naiveSegments struct {
	mu  sync.Mutex
	src segment.Store
}

func (n *naiveSegments) next(ctx context.Context) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	seg, err := n.src.NextSegment(ctx, "bench", 1)
	return int64(seg.Start), err
}
