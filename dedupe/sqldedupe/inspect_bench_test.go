package sqldedupe_test

import (
	"testing"

	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testkit"
)

// BenchmarkInspect measures the Inspector over 5 groups of 2000 records.
func BenchmarkInspect(b *testing.B) {
	for _, be := range testdb.Backends {
		b.Run(be.Name, func(b *testing.B) {
			s := newStore(b, be.Open(b), be.Dialect, sqldedupe.Config{})
			testkit.BenchInspector(b, s, "bench", 5, 2000)
		})
	}
}
