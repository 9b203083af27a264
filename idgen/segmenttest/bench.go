package segmenttest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/idgen"
)

// BenchAllocator measures Next of an allocator over src, at
// [idgen.SegmentConfig]'s defaults, from tag, which must exist. It reports
// the segments the allocator reserved and, if sent is not nil, the round
// trips per segment: sent returns a running count of what reached the
// store, as the backend's test counts it.
func BenchAllocator(b *testing.B, src idgen.SegmentSource, tag string, sent func() int64) {
	b.Helper()
	ctx := b.Context()
	c := &countingSource{SegmentSource: src}
	a, err := idgen.NewSegmentAllocator(ctx, c, tag, idgen.SegmentConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	var rts int64
	if sent != nil {
		rts = sent()
	}
	segs := c.segments.Load()
	for b.Loop() {
		if _, err := a.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	segs = c.segments.Load() - segs
	b.ReportMetric(float64(segs), "segments")
	if sent != nil && segs > 0 {
		b.ReportMetric(float64(sent()-rts)/float64(segs), "rt/segment")
	}
}

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
