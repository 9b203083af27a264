package sqlidgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/idbench"
	"github.com/idemq/idemq/internal/testdb"
)

// BenchmarkLeaser measures the latency of Renew and of Acquire plus Release
// on each database, each taking turns with a SELECT 1 on the same pool of
// connections, the floor of one round trip, reported as the peer metric
// select1-ns/op: the bench table's ratio is the call's cost in round trips.
func BenchmarkLeaser(b *testing.B) {
	for _, be := range testdb.Backends {
		db := be.Open(b)
		l := newLeaser(b, db, be.Dialect, sqlidgen.Config{Pool: "bench", Size: 1024, Lease: time.Minute})
		idbench.Leaser(b, be.Name+"/", l, "select1", func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "SELECT 1")
			return err
		})
	}
}
