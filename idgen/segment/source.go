package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Errors of segment mode. They are wrapped with details; test with
// errors.Is.
var (
	// ErrUnknownTag reports a tag its source does not hold: create it first
	// ([Admin.CreateTag], or `idemq segment create`).
	ErrUnknownTag = errors.New("segment: unknown tag")
	// ErrMaxReached reports a tag whose counter has reached its maximum: no
	// ID above it is ever issued, and none below it twice. Raise the
	// maximum (`idemq segment set-max`) or move to a new tag.
	ErrMaxReached = errors.New("segment: tag reached its maximum")
	// ErrTagExists reports an [Admin.CreateTag] of a tag the source holds
	// already: it is left as it is.
	ErrTagExists = errors.New("segment: tag exists")
	// ErrBadSegment reports a segment its source should never have
	// returned: empty, negative, longer than asked for, or starting below
	// the end of one it gave the same allocator before. The last means the
	// tag's counter went back (a restored backup, a Redis that lost its
	// data) and IDs would repeat: set the tag's counter past the highest ID
	// issued before using it.
	ErrBadSegment = errors.New("segment: source returned a bad segment")
	// ErrInvalidConfig reports a Config, a Tag, a step, a maximum or an
	// AppShard packing that cannot work.
	ErrInvalidConfig = errors.New("segment: invalid config")
	// ErrRange reports a field that does not fit its bits in
	// [AppShard.Pack].
	ErrRange = errors.New("segment: value out of range")
	// ErrClosed reports a call on a closed Allocator.
	ErrClosed = errors.New("segment: allocator closed")
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

// Len is the number of IDs in s.
func (s Segment) Len() int64 { return s.End - s.Start }

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

// Bounds of a Tag: Leaf's column sizes (biz_tag varchar(128), step int,
// description varchar(256)), which every source keeps so that a tag moves
// between sources as it is.
const (
	MaxTagLen         = 128           // bytes of a tag name
	MaxDescriptionLen = 256           // bytes of a description; sources cut longer ones
	MaxTagStep        = math.MaxInt32 // IDs in a segment reserved with the stored step
)

// ValidTagName reports whether name can name a tag: 1 to MaxTagLen bytes
// of UTF-8 (PostgreSQL refuses invalid UTF-8 even in a query). Names are
// compared byte for byte.
func ValidTagName(name string) bool {
	return name != "" && len(name) <= MaxTagLen && utf8.ValidString(name)
}

// Validate reports whether a source may create t: a valid name
// (ValidTagName), a Step from 1 to MaxTagStep, MaxID and Max not negative,
// and Max either 0 (none) or not below MaxID. A longer Description is no
// error. Errors wrap ErrInvalidConfig.
func (t Tag) Validate() error {
	var why string
	switch {
	case !ValidTagName(t.Tag):
		why = fmt.Sprintf("want a name of 1 to %d bytes of UTF-8", MaxTagLen)
	case t.Step <= 0 || t.Step > MaxTagStep:
		why = fmt.Sprintf("Step %d: want 1 to %d IDs a segment", t.Step, MaxTagStep)
	case t.MaxID < 0:
		why = fmt.Sprintf("MaxID %d: want the first ID to issue, 0 or more", t.MaxID)
	case t.Max < 0:
		why = fmt.Sprintf("Max %d: want 0 for no maximum, or a positive one", t.Max)
	case t.Max > 0 && t.Max < t.MaxID:
		why = fmt.Sprintf("Max %d is below MaxID %d: want a maximum the counter has not passed", t.Max, t.MaxID)
	default:
		return nil
	}
	return fmt.Errorf("segment: tag %q: %s: %w", t.Tag, why, ErrInvalidConfig)
}

// A Source reserves segments of named counters (tags) for allocators on many
// hosts: the sqlidgen, redisidgen and memidgen sources implement it, and an
// [Allocator] takes IDs from one.
//
// NextSegment raises tag's MaxID by step — the tag's stored Step when step
// is 0 — atomically, and returns the segment between the old and the new
// MaxID: one store round trip when step is given. When fewer than step IDs
// remain below the tag's maximum, the segment holds what remains; when none
// remain it fails with ErrMaxReached and changes nothing. It fails with
// ErrUnknownTag for a tag the source does not hold, and with
// ErrInvalidConfig for a negative step. Any other error means the source
// could not be reached and the outcome is unknown: a segment may have been
// reserved and lost, which costs IDs, never uniqueness.
//
// Implementations are safe for concurrent use by many goroutines and
// processes: two calls never return overlapping segments.
type Source interface {
	NextSegment(ctx context.Context, tag string, step int64) (Segment, error)
}

// Admin is the operator's side of a source, which the `idemq segment`
// commands use; the sqlidgen, redisidgen and memidgen sources implement it
// beside Source, and [github.com/idemq/idemq/idgen/segment/segmenttest]
// checks both.
//
// CreateTag records a new tag whose first segment starts at tag.MaxID; a tag
// that Validate refuses fails with its error, and one the source holds with
// ErrTagExists, unchanged. Tag returns a tag's record, or fails with
// ErrUnknownTag; Tags returns every tag's, sorted by name. SetMax sets a
// tag's maximum, 0 removing it; a maximum below the tag's MaxID fails with
// ErrInvalidConfig and changes nothing, since the IDs below MaxID were handed
// out already. Every call honours ctx; an error other than these sentinels
// means the source could not be reached.
type Admin interface {
	CreateTag(ctx context.Context, tag Tag) error
	Tag(ctx context.Context, name string) (Tag, error)
	Tags(ctx context.Context) ([]Tag, error)
	SetMax(ctx context.Context, name string, max int64) error
}
