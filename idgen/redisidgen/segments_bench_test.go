package redisidgen_test

import (
	"context"
	"crypto/rand"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/redisidgen"
	"github.com/idemq/idemq/internal/testenv"
)

// countingSource counts the segments its allocator reserves.
type countingSource struct {
	idgen.SegmentSource
	segments atomic.Int64
}

func (c *countingSource) NextSegment(ctx context.Context, tag string, step int64) (idgen.Segment, error) {
	seg, err := c.SegmentSource.NextSegment(ctx, tag, step)
	if err == nil {
		c.segments.Add(1)
	}
	return seg, err
}

// BenchmarkSegmentSource measures an ID from a segment allocator over
// Redis (idemq, the double buffer and adaptive step at their defaults)
// against the naive way, an INCR per ID. The rows report commands sent per
// segment, and per ID for the baseline.
func BenchmarkSegmentSource(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, testenv.Redis(b))
	hook := &countHook{}
	c.AddHook(hook)
	s := newSegments(b, c, redisidgen.SegmentsConfig{Namespace: "bench"})
	tag := "bench-" + strings.ToLower(rand.Text()[:8])
	if err := s.CreateTag(ctx, idgen.SegmentTag{Tag: tag, Step: 1000}); err != nil {
		b.Fatal(err)
	}
	b.Run("Redis/idemq", func(b *testing.B) {
		src := &countingSource{SegmentSource: s}
		a, err := idgen.NewSegmentAllocator(ctx, src, tag, idgen.SegmentConfig{})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		hook.take()
		segs := src.segments.Load()
		for b.Loop() {
			if _, err := a.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		segs = src.segments.Load() - segs
		b.ReportMetric(float64(segs), "segments")
		if segs > 0 {
			b.ReportMetric(float64(len(hook.take()))/float64(segs), "rt/segment")
		}
	})
	b.Run("Redis/naive-incr", func(b *testing.B) {
		key := "{bench}:naive-" + tag
		hook.take()
		for b.Loop() {
			if err := c.Incr(ctx, key).Err(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(hook.take()))/float64(b.N), "rt/id")
	})
}
