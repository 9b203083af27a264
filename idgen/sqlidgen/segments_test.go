package sqlidgen_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/sqldialect"
	"github.com/idemq/idemq/internal/testdb"
)

// newSegments returns Segments over db, with its table migrated, closed
// when tb ends.
func newSegments(tb testing.TB, db *sql.DB, d sqldialect.Dialect, table string) *sqlidgen.Segments {
	tb.Helper()
	s, err := sqlidgen.NewSegments(db, d, table)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestSegmentConformance(t *testing.T) {
	for _, b := range append(testdb.Backends, testdb.MySQLOptions) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			// One database per dialect, as for the leasers; every source
			// of a test has connections of its own, as another host
			// would.
			dsn := b.DSN(t)
			open := func(t *testing.T) *sql.DB { return b.OpenDSN(t, dsn) }
			newSegments(t, open(t), b.Dialect, "")
			segmenttest.Run(t, func(t *testing.T) segment.Store {
				s, err := sqlidgen.NewSegments(open(t), b.Dialect, "")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}, 0)
		})
	}
}

// Leaf's own table, created by Leaf's DDL and filled by Leaf's sample
// insert, serves as it is once it has the max_limit column, as the package
// documentation tells a Leaf user.
func TestSegmentsLeafTable(t *testing.T) {
	b := testdb.MySQL
	db := b.Open(t)
	ctx := t.Context()
	for _, stmt := range []string{
		"CREATE TABLE `leaf_alloc` (\n" +
			"  `biz_tag` varchar(128) NOT NULL DEFAULT '',\n" +
			"  `max_id` bigint(20) NOT NULL DEFAULT '1',\n" +
			"  `step` int(11) NOT NULL,\n" +
			"  `description` varchar(256) DEFAULT NULL,\n" +
			"  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,\n" +
			"  PRIMARY KEY (`biz_tag`)\n" +
			") ENGINE=InnoDB",
		"insert into leaf_alloc(biz_tag, max_id, step, description) values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')",
		"insert into leaf_alloc(biz_tag, max_id, step) values('no-description', 1, 10)",
		"ALTER TABLE leaf_alloc ADD COLUMN max_limit BIGINT NOT NULL DEFAULT 0",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	s, err := sqlidgen.NewSegments(db, b.Dialect, "leaf_alloc")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Leaf's first segment of a new tag is [1, 2001): its max_id starts
	// at 1 and its first UPDATE raises it by the step.
	seg, err := s.NextSegment(ctx, "leaf-segment-test", 0)
	if err != nil || seg.Start != 1 || seg.End != 2001 || seg.Step != 2000 {
		t.Fatalf("NextSegment = %+v, %v; want [1, 2001) of step 2000", seg, err)
	}
	tags, err := s.Tags(ctx)
	if err != nil || len(tags) != 2 {
		t.Fatalf("Tags = %+v, %v; want Leaf's two rows", tags, err)
	}
	if tags[0].Tag != "leaf-segment-test" || tags[0].MaxID != 2001 || tags[0].Description != "Test leaf Segment Mode Get Id" ||
		tags[1].Tag != "no-description" || tags[1].Description != "" || tags[1].Updated.IsZero() {
		t.Fatalf("Tags = %+v", tags)
	}
	if err := s.SetMax(ctx, "leaf-segment-test", 3000); err != nil {
		t.Fatal(err)
	}
	seg, err = s.NextSegment(ctx, "leaf-segment-test", 0)
	if err != nil || seg.Start != 2001 || seg.End != 3000 || seg.Max != 3000 {
		t.Fatalf("NextSegment = %+v, %v; want the short [2001, 3000) below the maximum", seg, err)
	}
}

// An answer lost after the database reserved a segment: NextSegment fails
// with an error of unknown outcome, and the next call gets the next
// segment. The lost one is never handed out: it costs its IDs, never
// uniqueness.
func TestSegmentLostAnswer(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			var drop atomic.Bool
			db := b.OpenWith(t, &testdb.Hooks{Statement: func(query string) func() error {
				if !strings.Contains(query, "SET max_id") || !drop.CompareAndSwap(true, false) {
					return nil
				}
				return func() error { return errLost }
			}})
			s := newSegments(t, db, b.Dialect, "")
			ctx := t.Context()
			if err := s.CreateTag(ctx, segment.Tag{Tag: "lost", Step: 10}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.NextSegment(ctx, "lost", 0); err != nil {
				t.Fatal(err)
			}
			drop.Store(true)
			_, err := s.NextSegment(ctx, "lost", 0)
			if !errors.Is(err, errLost) {
				t.Fatalf("NextSegment with its answer lost = %v, want the driver's error", err)
			}
			for _, known := range []error{segment.ErrUnknownTag, segment.ErrMaxReached, idgen.ErrInvalidConfig} {
				if errors.Is(err, known) {
					t.Fatalf("NextSegment with its answer lost = %v: a known outcome", err)
				}
			}
			seg, err := s.NextSegment(ctx, "lost", 0)
			if err != nil || seg.Start != 20 || seg.End != 30 {
				t.Fatalf("NextSegment after a lost answer = %+v, %v; want [20, 30), [10, 20) lost", seg, err)
			}
		})
	}
}

var errLost = errors.New("answer lost")

// A row whose stored step is 0, which CreateTag refuses but an operator may
// write: a segment of the stored step fails with ErrInvalidConfig and
// leaves the counter as it was; one of a given step is reserved.
func TestSegmentStoredStepZero(t *testing.T) {
	eachBackend(t, append(testdb.Backends, testdb.MySQLOptions), func(t *testing.T, b testdb.Backend, db *sql.DB) {
		s := newSegments(t, db, b.Dialect, "")
		ctx := t.Context()
		if err := s.CreateTag(ctx, segment.Tag{Tag: "zero", MaxID: 5, Step: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE idemq_segment SET step = 0 WHERE biz_tag = 'zero'"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if seg, err := s.NextSegment(ctx, "zero", 0); !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("NextSegment(0) with stored step 0 = %+v, %v; want ErrInvalidConfig", seg, err)
			}
		}
		if seg, err := s.NextSegment(ctx, "zero", 3); err != nil || seg.Start != 5 || seg.End != 8 {
			t.Fatalf("NextSegment(3) = %+v, %v; want [5, 8)", seg, err)
		}
	})
}
