package sqldedupe_test

import (
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testdb"
)

// TestGroupCommitConformance runs the conformance suite on the Store of
// each dialect through dedupe.WithGroupCommit, whose coalesced round trips
// must answer as the Store's own calls do.
func TestGroupCommitConformance(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			dedupetest.Run(t, func(t *testing.T) dedupe.Store {
				return dedupe.WithGroupCommit(newStore(t, db, b.Dialect, sqldedupe.Config{}))
			}, dedupetest.Features{Batcher: true})
		})
	}
}
