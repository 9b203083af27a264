package sqldedupe_test

import (
	"testing"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/dedupetest"
	"github.com/idemq/idemq/dedupe/sqldedupe"
	"github.com/idemq/idemq/internal/testdb"
)

func TestConformance(t *testing.T) {
	for _, b := range append(testdb.Backends, testdb.MySQLOptions) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			// One database per dialect: the suite keeps its tests apart
			// by group, and a store per subtest shares it.
			db := b.Open(t)
			dedupetest.RunConformanceTests(t, func(t *testing.T) dedupe.Store {
				return newStore(t, db, b.Dialect, sqldedupe.Config{})
			}, dedupetest.Features{Inspector: true})
		})
	}
}
