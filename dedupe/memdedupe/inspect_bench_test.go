package memdedupe_test

import (
	"testing"

	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/testkit"
)

// BenchmarkInspect measures the Inspector over 5 groups of 2000 records;
// List and Stats read all 10000.
func BenchmarkInspect(b *testing.B) {
	testkit.BenchInspector(b, memdedupe.New(memdedupe.Config{}), "bench", 5, 2000)
}
