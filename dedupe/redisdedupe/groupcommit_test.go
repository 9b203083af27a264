package redisdedupe_test

import (
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/redisdedupe"
)

// TestGroupCommitConformance runs the conformance suite on the Store
// through dedupe.WithGroupCommit, whose coalesced round trips must answer
// as the Store's own calls do.
func TestGroupCommitConformance(t *testing.T) {
	eachPath(t, newClient(t), func(t *testing.T, s *redisdedupe.Store) {
		dedupetest.Run(t, func(*testing.T) dedupe.Store { return dedupe.WithGroupCommit(s) }, dedupetest.Features{Batcher: true})
	})
}
