package sqlidgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/testdb"
)

// BenchmarkLeaser measures the latency of Renew and of Acquire plus Release
// on each database, each taking turns with a SELECT 1 on the same pool of
// connections, the floor of one round trip, reported as the peer metric
// select1-ns/op: the bench table's ratio is the call's cost in round trips.
func BenchmarkLeaser(b *testing.B) {
	ctx := context.Background()
	for _, be := range testdb.Backends {
		db := be.Open(b)
		l := newLeaser(b, db, be.Dialect, sqlidgen.Config{Pool: "bench", Size: 1024, Lease: time.Minute})
		req := idgen.LeaseRequest{MaxNode: 1023, Owner: "bench"}
		lease, err := l.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		calls := []struct {
			name string
			call func() error
		}{
			{"idemq-renew", func() error {
				var err error
				lease, err = l.Renew(ctx, lease, time.Now())
				return err
			}},
			{"idemq-acquire+release", func() error {
				other, err := l.Acquire(ctx, req)
				if err != nil {
					return err
				}
				return l.Release(ctx, other, time.Now())
			}},
		}
		for _, c := range calls {
			b.Run(be.Name+"/"+c.name, func(b *testing.B) {
				var spent, floor time.Duration
				n := 0
				for b.Loop() {
					start := time.Now()
					if err := c.call(); err != nil {
						b.Fatal(err)
					}
					mid := time.Now()
					if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
						b.Fatal(err)
					}
					spent, floor, n = spent+mid.Sub(start), floor+time.Since(mid), n+1
				}
				b.ReportMetric(float64(spent.Nanoseconds())/float64(n), "ns/op")
				b.ReportMetric(float64(floor.Nanoseconds())/float64(n), "select1-ns/op")
			})
		}
	}
}
