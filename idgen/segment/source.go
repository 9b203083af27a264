package segment

import (
	"context"
	"errors"
	"time"
)

// Errors of segment mode. They are wrapped with details; test with
// errors.Is. A Config, Tag, step or maximum that cannot work wraps
// [idgen.ErrInvalidConfig], and a call on a closed Allocator
// [idgen.ErrClosed].
var (
	// ErrUnknownTag reports a tag its store does not hold: create it first
	// ([Store].CreateTag, or `idemq segment create`).
	ErrUnknownTag = errors.New("segment: unknown tag")
	// ErrMaxReached reports a tag whose counter has reached its maximum: no
	// ID above it is ever issued, and none below it twice. Raise the
	// maximum (`idemq segment set-max`) or move to a new tag.
	ErrMaxReached = errors.New("segment: tag reached its maximum")
	// ErrTagExists reports a [Store].CreateTag of a tag the store holds
	// already: it is left as it is.
	ErrTagExists = errors.New("segment: tag exists")
	// ErrBadSegment reports a segment its store should never have
	// returned: empty, negative, longer than asked for, or starting below
	// the end of one it gave the same allocator before. The last means the
	// tag's counter went back (a restored backup, a Redis that lost its
	// data) and IDs would repeat: set the tag's counter past the highest ID
	// issued before using it.
	ErrBadSegment = errors.New("segment: store returned a bad segment")
)

// A Segment is a range of a tag's counter reserved for one allocator: the
// IDs Start to End-1. Nobody else is ever given any of them.
type Segment struct {
	Start, End int64
	// Step is the tag's stored step when the segment was reserved: the
	// floor of an allocator's adaptive step (Leaf's step column).
	Step int64
	// Max is the tag's maximum: no segment reaches past it. Zero means
	// none.
	Max int64
}

// A Tag is a tag's record in its source: Meituan Leaf's row (biz_tag,
// max_id, step, description, update_time) plus its maximum.
type Tag struct {
	Tag string
	// MaxID is the end of the last segment reserved: the next segment
	// starts at it.
	MaxID int64
	// Step is the length of a segment reserved without a step of its own,
	// and the least an adaptive allocator asks for.
	Step int64
	// Max is the highest value MaxID may reach; zero means no maximum.
	Max         int64
	Description string
	// Updated is when the row last changed, by the source's clock.
	Updated time.Time
}

// A Store keeps named counters (tags) for allocators on many hosts, as
// Meituan Leaf's table does: the sqlidgen and redisidgen stores implement
// it, [github.com/idemq/idemq/idgen/segment/segmenttest] checks them, an
// [Allocator] takes IDs from one, and the `idemq segment` commands manage
// its tags. Implementations are safe for concurrent use by many goroutines
// and processes. Every call honours ctx; an error other than the sentinels
// means the store could not be reached and the outcome is unknown.
type Store interface {
	// NextSegment raises tag's MaxID by step — the tag's stored Step when
	// step is 0 — atomically, and returns the segment between the old and
	// the new MaxID: one store round trip when step is given. When fewer
	// than step IDs remain below the tag's maximum, the segment holds what
	// remains; when none remain it fails with ErrMaxReached and changes
	// nothing. It fails with ErrUnknownTag for a tag the store does not
	// hold, and with idgen.ErrInvalidConfig for a negative step. Two calls
	// never return overlapping segments; a segment whose answer was lost
	// costs IDs, never uniqueness.
	NextSegment(ctx context.Context, tag string, step int64) (Segment, error)
	// CreateTag records a new tag whose first segment starts at
	// tag.MaxID, with tag.Step (1 to 2^31-1, Leaf's INT column) and
	// tag.Max (0 for none, else at least MaxID). The name is 1 to 128
	// bytes of UTF-8, compared byte for byte; a Description longer than
	// 256 bytes is cut; Updated is ignored. A tag that breaks these rules
	// fails with idgen.ErrInvalidConfig, and one the store holds with
	// ErrTagExists, unchanged.
	CreateTag(ctx context.Context, tag Tag) error
	// Tag returns a tag's record, or fails with ErrUnknownTag.
	Tag(ctx context.Context, name string) (Tag, error)
	// Tags returns every tag's record, sorted by name byte for byte.
	Tags(ctx context.Context) ([]Tag, error)
	// SetMax sets a tag's maximum, 0 removing it; a maximum below the
	// tag's MaxID fails with idgen.ErrInvalidConfig and changes nothing,
	// since the IDs below MaxID were handed out already. An unknown tag
	// fails with ErrUnknownTag.
	SetMax(ctx context.Context, name string, max int64) error
}
