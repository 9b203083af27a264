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
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/segtag"
)

// Segments is an in-memory [segment.Store]: Leaf's table of tags as a
// map, for tests and for the allocators of one process. Its counters live
// as long as it does, so allocators in different processes, or in a process
// that restarts, need a shared store: [github.com/idemq/idemq/idgen/redisidgen]
// or [github.com/idemq/idemq/idgen/sqlidgen]. It is safe for concurrent use.
type Segments struct {
	mu   sync.Mutex
	tags map[string]*segment.Tag
}

var (
	_ segment.Store = (*Segments)(nil)
)

// NewSegments returns a source without tags.
func NewSegments() *Segments {
	return &Segments{tags: map[string]*segment.Tag{}}
}

// CreateTag adds t: its Tag names it, MaxID is where its first segment
// starts (0 or more), Step is the length of a segment reserved without a
// step of its own (required), Max the highest value MaxID may reach (0 for
// none). Updated is set to now. A tag that exists fails with
// [segment.ErrTagExists], unchanged; one [segment.Tag.Validate] refuses, with
// its error.
func (s *Segments) CreateTag(ctx context.Context, t segment.Tag) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := segtag.Validate(t); err != nil {
		return fmt.Errorf("memidgen: create tag: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tags[t.Tag]; ok {
		return fmt.Errorf("memidgen: create tag %q: %w", t.Tag, segment.ErrTagExists)
	}
	t.Updated = time.Now()
	s.tags[t.Tag] = &t
	return nil
}

// NextSegment implements [segment.Store].
func (s *Segments) NextSegment(ctx context.Context, tag string, step int64) (segment.Segment, error) {
	if err := ctx.Err(); err != nil {
		return segment.Segment{}, err
	}
	if step < 0 {
		return segment.Segment{}, fmt.Errorf("memidgen: next segment of tag %q: negative step %d: %w", tag, step, idgen.ErrInvalidConfig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tags[tag]
	if !ok {
		return segment.Segment{}, fmt.Errorf("memidgen: next segment of tag %q: %w", tag, segment.ErrUnknownTag)
	}
	if step == 0 {
		step = t.Step
	}
	limit := t.Max
	if limit == 0 {
		limit = math.MaxInt64
	}
	if t.MaxID >= limit {
		return segment.Segment{}, fmt.Errorf("memidgen: next segment of tag %q: MaxID %d: %w", tag, t.MaxID, segment.ErrMaxReached)
	}
	seg := segment.Segment{Start: t.MaxID, End: t.MaxID + min(step, limit-t.MaxID), Step: t.Step, Max: t.Max}
	t.MaxID, t.Updated = seg.End, time.Now()
	return seg, nil
}

// Tag returns the record of tag, or an error wrapping [segment.ErrUnknownTag].
func (s *Segments) Tag(ctx context.Context, tag string) (segment.Tag, error) {
	if err := ctx.Err(); err != nil {
		return segment.Tag{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tags[tag]
	if !ok {
		return segment.Tag{}, fmt.Errorf("memidgen: tag %q: %w", tag, segment.ErrUnknownTag)
	}
	return *t, nil
}

// Tags returns every tag's record, sorted by name.
func (s *Segments) Tags(ctx context.Context) ([]segment.Tag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]segment.Tag, 0, len(s.tags))
	for _, t := range s.tags {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b segment.Tag) int { return cmp.Compare(a.Tag, b.Tag) })
	return out, nil
}

// SetMax sets tag's maximum: 0 for none, or at least its MaxID, since IDs
// below MaxID may have been issued. Raising it lets allocators stopped by
// [segment.ErrMaxReached] resume. Errors wrap [segment.ErrUnknownTag] or
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
		return fmt.Errorf("memidgen: set the maximum of tag %q: %w", tag, segment.ErrUnknownTag)
	case limit < 0 || (limit > 0 && limit < t.MaxID):
		return fmt.Errorf("memidgen: set the maximum of tag %q to %d: below its MaxID %d, which may have been issued: %w", tag, limit, t.MaxID, idgen.ErrInvalidConfig)
	}
	t.Max, t.Updated = limit, time.Now()
	return nil
}
