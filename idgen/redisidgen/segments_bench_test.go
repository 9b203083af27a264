package redisidgen_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/idbench"
	"github.com/idemq/idemq/internal/testenv"
)

// BenchmarkSegmentSource measures an ID from a segment allocator over
// Redis (idemq, the double buffer and adaptive step at their defaults)
// against the naive way, an INCR per ID. The rows report commands sent per
// segment, and per ID for the baseline.
func BenchmarkSegmentSource(b *testing.B) {
	ctx := context.Background()
	c := newClient(b, testenv.Redis(b))
	hook := &countHook{}
	c.AddHook(hook)
	s := newSegments(b, c, "bench")
	tag := "bench-" + strings.ToLower(rand.Text()[:8])
	if err := s.CreateTag(ctx, segment.Tag{Tag: tag, Step: 1000}); err != nil {
		b.Fatal(err)
	}
	b.Run("Redis/idemq", func(b *testing.B) {
		var sent int64
		idbench.Allocator(b, s, tag, func() int64 {
			sent += int64(len(hook.take()))
			return sent
		})
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
