package sqlidgen_test

import (
	"testing"

	"github.com/idemq/idemq/idgen/segment"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/fleettest"
	"github.com/idemq/idemq/internal/testdb"
)

// newChildSegments is a child's source over the database at DSN, of the
// backend named BACKEND, with connections of its own.
func newChildSegments(env map[string]string) (segment.Store, func(), error) {
	db, b, err := testdb.OpenNamed(env["BACKEND"], env["DSN"])
	if err != nil {
		return nil, nil, err
	}
	s, err := sqlidgen.NewSegments(db, b.Dialect, "")
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
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			dsn := b.DSN(t)
			s := newSegments(t, b.OpenDSN(t, dsn), b.Dialect, "")
			fleettest.SegmentProcesses(t, s, "procs", map[string]string{"BACKEND": b.Name, "DSN": dsn})
		})
	}
}
