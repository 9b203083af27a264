// Package segtag holds the rules every segment source keeps for a tag's
// record: Leaf's column sizes (biz_tag varchar(128), step int, description
// varchar(256)), so that a tag moves between sources as it is.
package segtag

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
)

// Bounds of a tag.
const (
	MaxLen            = 128           // bytes of a tag name
	MaxDescriptionLen = 256           // bytes of a description; sources cut longer ones
	MaxStep           = math.MaxInt32 // IDs in a segment reserved with the stored step
)

// ValidName reports whether name can name a tag: 1 to MaxLen bytes of
// UTF-8 (PostgreSQL refuses invalid UTF-8 even in a query). Names are
// compared byte for byte.
func ValidName(name string) bool {
	return name != "" && len(name) <= MaxLen && utf8.ValidString(name)
}

// Validate reports whether a source may create t: a valid name, a Step
// from 1 to MaxStep, MaxID and Max not negative, and Max either 0 (none)
// or not below MaxID. A longer Description is no error. Errors wrap
// idgen.ErrInvalidConfig.
func Validate(t segment.Tag) error {
	var why string
	switch {
	case !ValidName(t.Tag):
		why = fmt.Sprintf("want a name of 1 to %d bytes of UTF-8", MaxLen)
	case t.Step <= 0 || t.Step > MaxStep:
		why = fmt.Sprintf("Step %d: want 1 to %d IDs a segment", t.Step, MaxStep)
	case t.MaxID < 0:
		why = fmt.Sprintf("MaxID %d: want the first ID to issue, 0 or more", t.MaxID)
	case t.Max < 0:
		why = fmt.Sprintf("Max %d: want 0 for no maximum, or a positive one", t.Max)
	case t.Max > 0 && t.Max < t.MaxID:
		why = fmt.Sprintf("Max %d is below MaxID %d: want a maximum the counter has not passed", t.Max, t.MaxID)
	default:
		return nil
	}
	return fmt.Errorf("segment: tag %q: %s: %w", t.Tag, why, idgen.ErrInvalidConfig)
}
