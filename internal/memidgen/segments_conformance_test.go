package memidgen_test

import (
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/internal/memidgen"
)

// memidgen.Segments passes the suite the SQL and Redis sources pass: every
// source of a test is the one map, as the allocators of one process share
// it.
func TestSegmentConformance(t *testing.T) {
	s := memidgen.NewSegments()
	segmenttest.Run(t, func(*testing.T) segment.Store { return s }, 0)
}
