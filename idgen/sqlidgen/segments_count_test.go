package sqlidgen_test

import (
	"errors"
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

// A segment costs one statement, one round trip, with a given step and with
// the stored one, once the Segments has prepared its UPDATE (and, on MySQL,
// read the tag's step); the slow paths cost a few.
func TestSegmentRoundTrips(t *testing.T) {
	for _, b := range append(testdb.Backends, testdb.MySQLOptions) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			h := &testdb.Hooks{}
			db := b.OpenWith(t, h)
			// One connection: the statement is prepared on it once.
			db.SetMaxOpenConns(1)
			s := newSegments(t, db, b.Dialect, "")
			ctx := t.Context()
			if err := s.CreateTag(ctx, segment.Tag{Tag: "rt", Step: 10, Max: 1000}); err != nil {
				t.Fatal(err)
			}
			count := func(what string, want int64, call func() error) {
				t.Helper()
				before := h.RoundTrips()
				if err := call(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got := h.RoundTrips() - before; got != want {
					t.Fatalf("%s sent %d statements, want %d", what, got, want)
				}
			}
			next := func(step, start, end int64) func() error {
				return func() error {
					seg, err := s.NextSegment(ctx, "rt", step)
					if err == nil && (seg.Start != start || seg.End != end || seg.Step != 10 || seg.Max != 1000) {
						t.Fatalf("NextSegment(%d) = %+v, want [%d, %d) of step 10 and max 1000", step, seg, start, end)
					}
					return err
				}
			}
			// A read is one statement, but for MySQL without
			// interpolateParams, whose driver prepares a statement with
			// arguments in a round trip of its own.
			read := int64(1)
			if b.Name == "MySQL" {
				read = 2
			}
			// The first: prepare and run the UPDATE; on MySQL, which
			// learns the stored step from the row, the read first.
			first := int64(2)
			if b.Dialect == sqldialect.MySQL {
				first += read
			}
			count("first NextSegment(0)", first, next(0, 0, 10))
			count("NextSegment(0)", 1, next(0, 10, 20))
			count("NextSegment(7)", 1, next(7, 20, 27))
			count("NextSegment(500)", 1, next(500, 27, 527))
			// Fewer IDs left than the step: the UPDATE matches nothing,
			// the read finds 473 left, the UPDATE takes them.
			count("short NextSegment(500)", 2+read, next(500, 527, 1000))
			count("NextSegment at the maximum", 1+read, func() error {
				if _, err := s.NextSegment(ctx, "rt", 0); !errors.Is(err, segment.ErrMaxReached) {
					t.Fatalf("NextSegment at the maximum = %v", err)
				}
				return nil
			})
		})
	}
}
