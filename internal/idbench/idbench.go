// Package idbench measures leasers and segment allocators over the stores
// of idgen/redisidgen and idgen/sqlidgen, for their benchmarks.
package idbench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
)

// Leaser measures the latency of l's Renew and of its Acquire plus Release,
// the rows prefix+"idemq-renew" and prefix+"idemq-acquire+release", on a
// pool of 1024 nodes. Each call takes turns with floor, one round trip on
// the same connections, whose time is reported as the peer metric
// floorName-ns/op: the bench table's ratio is then the call's cost in round
// trips.
func Leaser(b *testing.B, prefix string, l idgen.Leaser, floorName string, floor func(context.Context) error) {
	ctx := context.Background()
	req := idgen.LeaseRequest{MaxNode: 1023, Owner: "bench"}
	lease, err := l.Acquire(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Release(ctx, lease, time.Now()) })
	calls := []struct {
		name string
		call func() error
	}{
		{"idemq-renew", func() error {
			var err error
			lease, err = l.Renew(ctx, lease, time.Now())
			return err
		}},
		{"idemq-acquire+release", func() error {
			other, err := l.Acquire(ctx, req)
			if err != nil {
				return err
			}
			return l.Release(ctx, other, time.Now())
		}},
	}
	for _, c := range calls {
		b.Run(prefix+c.name, func(b *testing.B) {
			var spent, floorSpent time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := floor(ctx); err != nil {
					b.Fatal(err)
				}
				spent, floorSpent, n = spent+mid.Sub(start), floorSpent+time.Since(mid), n+1
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(float64(floorSpent.Nanoseconds())/float64(n), floorName+"-ns/op")
		})
	}
}

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
