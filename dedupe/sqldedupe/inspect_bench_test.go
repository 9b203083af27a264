package sqldedupe_test

import (
	"testing"

	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/sqldedupe"
)

// BenchmarkInspect measures the Inspector over 5 groups of 2000 records.
func BenchmarkInspect(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := newStore(b, be.open(b), be.dialect, sqldedupe.Config{})
			dedupetest.BenchInspector(b, s, "bench", 5, 2000)
		})
	}
}
