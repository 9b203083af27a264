package memidgen

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/idemq/idemq/idgen"
)

// Segments is an in-memory [idgen.SegmentSource]: Leaf's table of tags as a
// map, for tests and for the allocators of one process. Its counters live
// as long as it does, so allocators in different processes, or in a process
// that restarts, need a shared store: [github.com/idemq/idemq/idgen/redisidgen]
// or [github.com/idemq/idemq/idgen/sqlidgen]. It is safe for concurrent use.
type Segments struct {
	mu   sync.Mutex
	tags map[string]*idgen.SegmentTag
}

var (
	_ idgen.SegmentSource = (*Segments)(nil)
	_ idgen.SegmentTags   = (*Segments)(nil)
)

// NewSegments returns a source without tags.
func NewSegments() *Segments {
	return &Segments{tags: map[string]*idgen.SegmentTag{}}
}

// CreateTag adds t: its Tag names it, MaxID is where its first segment
// starts (0 or more), Step is the length of a segment reserved without a
// step of its own (required), Max the highest value MaxID may reach (0 for
// none). Updated is set to now. A tag that exists fails with
// [idgen.ErrTagExists], unchanged; one [idgen.SegmentTag.Validate] refuses, with
// its error.
func (s *Segments) CreateTag(ctx context.Context, t idgen.SegmentTag) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("memidgen: create tag: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tags[t.Tag]; ok {
		return fmt.Errorf("memidgen: create tag %q: %w", t.Tag, idgen.ErrTagExists)
	}
	t.Updated = time.Now()
	s.tags[t.Tag] = &t
	return nil
}

// NextSegment implements [idgen.SegmentSource].
func (s *Segments) NextSegment(ctx context.Context, tag string, step int64) (idgen.Segment, error) {
	if err := ctx.Err(); err != nil {
		return idgen.Segment{}, err
	}
	if step < 0 {
		return idgen.Segment{}, fmt.Errorf("memidgen: next segment of tag %q: negative step %d: %w", tag, step, idgen.ErrInvalidConfig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tags[tag]
	if !ok {
		return idgen.Segment{}, fmt.Errorf("memidgen: next segment of tag %q: %w", tag, idgen.ErrUnknownTag)
	}
	if step == 0 {
		step = t.Step
	}
	limit := t.Max
	if limit == 0 {
		limit = math.MaxInt64
	}
	if t.MaxID >= limit {
		return idgen.Segment{}, fmt.Errorf("memidgen: next segment of tag %q: MaxID %d: %w", tag, t.MaxID, idgen.ErrMaxReached)
	}
	seg := idgen.Segment{Start: t.MaxID, End: t.MaxID + min(step, limit-t.MaxID), Step: t.Step, Max: t.Max}
	t.MaxID, t.Updated = seg.End, time.Now()
	return seg, nil
}

// Tag returns the record of tag, or an error wrapping [idgen.ErrUnknownTag].
func (s *Segments) Tag(ctx context.Context, tag string) (idgen.SegmentTag, error) {
	if err := ctx.Err(); err != nil {
		return idgen.SegmentTag{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tags[tag]
	if !ok {
		return idgen.SegmentTag{}, fmt.Errorf("memidgen: tag %q: %w", tag, idgen.ErrUnknownTag)
	}
	return *t, nil
}

// Tags returns every tag's record, sorted by name.
func (s *Segments) Tags(ctx context.Context) ([]idgen.SegmentTag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]idgen.SegmentTag, 0, len(s.tags))
	for _, t := range s.tags {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b idgen.SegmentTag) int { return cmp.Compare(a.Tag, b.Tag) })
	return out, nil
}

// SetMax sets tag's maximum: 0 for none, or at least its MaxID, since IDs
// below MaxID may have been issued. Raising it lets allocators stopped by
// [idgen.ErrMaxReached] resume. Errors wrap [idgen.ErrUnknownTag] or
// [idgen.ErrInvalidConfig].
func (s *Segments) SetMax(ctx context.Context, tag string, limit int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tags[tag]
	switch {
	case !ok:
		return fmt.Errorf("memidgen: set the maximum of tag %q: %w", tag, idgen.ErrUnknownTag)
	case limit < 0 || (limit > 0 && limit < t.MaxID):
		return fmt.Errorf("memidgen: set the maximum of tag %q to %d: below its MaxID %d, which may have been issued: %w", tag, limit, t.MaxID, idgen.ErrInvalidConfig)
	}
	t.Max, t.Updated = limit, time.Now()
	return nil
}
