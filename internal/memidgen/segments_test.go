package memidgen_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/memidgen"
)

func TestSegmentsNextSegment(t *testing.T) {
	type call struct {
		step int64
		want segment.Segment
		err  error
	}
	for _, tt := range []struct {
		name  string
		tag   segment.Tag
		calls []call
	}{
		{name: "stored and given steps", tag: segment.Tag{Tag: "t", MaxID: 1, Step: 1000}, calls: []call{
			{step: 0, want: segment.Segment{Start: 1, End: 1001, Step: 1000}},
			{step: 5, want: segment.Segment{Start: 1001, End: 1006, Step: 1000}},
			{step: 0, want: segment.Segment{Start: 1006, End: 2006, Step: 1000}},
		}},
		{name: "maximum", tag: segment.Tag{Tag: "t", Step: 10, Max: 25}, calls: []call{
			{want: segment.Segment{Start: 0, End: 10, Step: 10, Max: 25}},
			{step: 12, want: segment.Segment{Start: 10, End: 22, Step: 10, Max: 25}},
			{want: segment.Segment{Start: 22, End: 25, Step: 10, Max: 25}},
			{err: segment.ErrMaxReached},
			{step: 1, err: segment.ErrMaxReached},
		}},
		{name: "no maximum near the end of int64", tag: segment.Tag{Tag: "t", MaxID: math.MaxInt64 - 3, Step: 10}, calls: []call{
			{want: segment.Segment{Start: math.MaxInt64 - 3, End: math.MaxInt64, Step: 10}},
			{err: segment.ErrMaxReached},
		}},
		{name: "negative step", tag: segment.Tag{Tag: "t", Step: 10}, calls: []call{
			{step: -1, err: idgen.ErrInvalidConfig},
			{want: segment.Segment{Start: 0, End: 10, Step: 10}},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := memidgen.NewSegments()
			if err := s.CreateTag(ctx, tt.tag); err != nil {
				t.Fatal(err)
			}
			for i, c := range tt.calls {
				seg, err := s.NextSegment(ctx, tt.tag.Tag, c.step)
				if !errors.Is(err, c.err) || (err != nil) != (c.err != nil) || seg != c.want {
					t.Fatalf("call %d: NextSegment(%d) = %+v, %v; want %+v, %v", i, c.step, seg, err, c.want, c.err)
				}
			}
		})
	}
}

func TestSegmentsErrors(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s := memidgen.NewSegments()
	if err := s.CreateTag(ctx, segment.Tag{Tag: "t", MaxID: 20, Step: 10}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{name: "unknown tag", err: func() error { _, err := s.NextSegment(ctx, "nope", 0); return err }(), want: segment.ErrUnknownTag},
		{name: "cancelled", err: func() error { _, err := s.NextSegment(cancelled, "t", 0); return err }(), want: context.Canceled},
		{name: "Tag of an unknown tag", err: func() error { _, err := s.Tag(ctx, "nope"); return err }(), want: segment.ErrUnknownTag},
		{name: "create again", err: s.CreateTag(ctx, segment.Tag{Tag: "t", Step: 10}), want: segment.ErrTagExists},
		{name: "create without a name", err: s.CreateTag(ctx, segment.Tag{Step: 10}), want: idgen.ErrInvalidConfig},
		{name: "create without a step", err: s.CreateTag(ctx, segment.Tag{Tag: "u"}), want: idgen.ErrInvalidConfig},
		{name: "create past the maximum", err: s.CreateTag(ctx, segment.Tag{Tag: "u", MaxID: 11, Step: 1, Max: 10}), want: idgen.ErrInvalidConfig},
		{name: "create with a negative MaxID", err: s.CreateTag(ctx, segment.Tag{Tag: "u", MaxID: -1, Step: 1}), want: idgen.ErrInvalidConfig},
		{name: "maximum below MaxID", err: s.SetMax(ctx, "t", 19), want: idgen.ErrInvalidConfig},
		{name: "negative maximum", err: s.SetMax(ctx, "t", -1), want: idgen.ErrInvalidConfig},
		{name: "maximum of an unknown tag", err: s.SetMax(ctx, "nope", 100), want: segment.ErrUnknownTag},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Fatalf("got %v, want %v", tt.err, tt.want)
			}
		})
	}
	if tag, err := s.Tag(ctx, "t"); err != nil || tag.MaxID != 20 || tag.Step != 10 || tag.Max != 0 || tag.Updated.IsZero() {
		t.Fatalf("Tag after the failed calls = %+v, %v", tag, err)
	}
}

func TestSegmentsSetMax(t *testing.T) {
	ctx := context.Background()
	s := memidgen.NewSegments()
	if err := s.CreateTag(ctx, segment.Tag{Tag: "t", Step: 10, Max: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NextSegment(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NextSegment(ctx, "t", 0); !errors.Is(err, segment.ErrMaxReached) {
		t.Fatalf("at the maximum: %v", err)
	}
	if err := s.SetMax(ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
	if seg, err := s.NextSegment(ctx, "t", 0); err != nil || seg.Start != 10 || seg.Max != 0 {
		t.Fatalf("without a maximum: %+v, %v", seg, err)
	}
}

// Concurrent callers never get overlapping segments, and together they
// cover the counter without gaps.
func TestSegmentsConcurrent(t *testing.T) {
	ctx := context.Background()
	s := memidgen.NewSegments()
	if err := s.CreateTag(ctx, segment.Tag{Tag: "t", Step: 3}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var segs []segment.Segment
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				seg, err := s.NextSegment(ctx, "t", int64((g+i)%4))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				segs = append(segs, seg)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(segs, func(a, b segment.Segment) int { return int(a.Start - b.Start) })
	var end int64
	for _, seg := range segs {
		if seg.Start != end || (seg.End-seg.Start) <= 0 {
			t.Fatalf("segment [%d, %d) after one ending at %d", seg.Start, seg.End, end)
		}
		end = seg.End
	}
}
