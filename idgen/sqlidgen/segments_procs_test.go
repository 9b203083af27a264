package sqlidgen_test

import (
	"database/sql"
	"fmt"
	"os"
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/segment/segmenttest"
	"github.com/idemq/idemq/idgen/sqlidgen"
)

func init() {
	if segmenttest.IsChild() {
		os.Exit(segmenttest.Child(newChildSegments))
	}
}

// newChildSegments is a child's source over the database at DSN, of the
// backend named BACKEND, with connections of its own.
func newChildSegments(getenv func(string) string) (segment.Source, func(), error) {
	b := backendNamed(getenv("BACKEND"))
	if b.driver == "" {
		return nil, nil, fmt.Errorf("no backend %q", getenv("BACKEND"))
	}
	db, err := sql.Open(b.driver, getenv("DSN"))
	if err != nil {
		return nil, nil, err
	}
	s, err := sqlidgen.NewSegments(db, b.dialect, sqlidgen.SegmentsConfig{})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return s, func() { s.Close(); db.Close() }, nil
}

// Eight processes take IDs of one tag through segment allocators over one
// database, with a step of 10 so that they switch segments often: no ID is
// written twice, and every one lies between the tag's start and its MaxID.
func TestSegmentProcesses(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			db, err := sql.Open(b.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s := newSegments(t, db, b.dialect, sqlidgen.SegmentsConfig{})
			const start = 1_000_000
			if err := s.CreateTag(t.Context(), segment.Tag{Tag: "procs", MaxID: start, Step: 10}); err != nil {
				t.Fatal(err)
			}
			p := segmenttest.Processes{Env: map[string]string{"BACKEND": b.name, "DSN": dsn}}
			r := segmenttest.RunProcesses(t, "procs", p)
			tag, err := s.Tag(t.Context(), "procs")
			if err != nil {
				t.Fatal(err)
			}
			checkProcesses(t, r, start, tag.MaxID)
		})
	}
}

// checkProcesses checks a multi-process run wrote 8 x 20000 IDs, each
// once, all within [start, end).
func checkProcesses(t *testing.T, r segmenttest.ProcessReport, start, end int64) {
	t.Helper()
	t.Logf("%d IDs from %d processes (%v), %d distinct, %d duplicates, in [%d, %d]; segments per process %v; the tag's MaxID is %d",
		r.IDs, len(r.PerProcess), r.PerProcess, r.Distinct, r.IDs-r.Distinct, r.Min, r.Max, r.Segments, end)
	if r.Distinct != r.IDs {
		t.Fatalf("%d of %d IDs were written twice", r.IDs-r.Distinct, r.IDs)
	}
	if r.IDs != 8*20000 {
		t.Fatalf("%d IDs written, want %d", r.IDs, 8*20000)
	}
	if r.Min < start || r.Max >= end {
		t.Fatalf("IDs in [%d, %d], outside the tag's [%d, %d)", r.Min, r.Max, start, end)
	}
}
