// Package segbench measures segment allocators over the stores of
// idgen/redisidgen and idgen/sqlidgen, for their benchmarks.
package segbench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/idgen/segment"
)

// Allocator measures Next of an allocator over src, at
// [segment.Config]'s defaults, from tag, which must exist. It reports
// the segments the allocator reserved and, if sent is not nil, the round
// trips per segment: sent returns a running count of what reached the
// store, as the backend's test counts it.
func Allocator(b *testing.B, src segment.Store, tag string, sent func() int64) {
	b.Helper()
	ctx := b.Context()
	c := &countingStore{Store: src}
	a, err := segment.New(ctx, c, tag, segment.Config{})
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

// countingStore counts the segments its allocator reserves.
type countingStore struct {
	segment.Store
	segments atomic.Int64
}

func (c *countingStore) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	seg, err := c.Store.NextSegment(ctx, tag, step)
	if err == nil {
		c.segments.Add(1)
	}
	return seg, err
}
