package sqlidgen_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/testdb"
)

// TestLease checks the sender's one call on each database, which creates
// the table: leasetest.OneCall's checks, and a database gone fails at once,
// not after the caller's context.
func TestLease(t *testing.T) {
	eachBackend(t, testdb.Backends, func(t *testing.T, b testdb.Backend, db *sql.DB) {
		const pool = "senders"
		lease := func(ctx context.Context, pool string) (*idgen.Generator, error) {
			return sqlidgen.Lease(ctx, db, b.Dialect, pool)
		}
		leasetest.OneCall(t, pool, lease, func(ctx context.Context) (int, error) {
			rows, err := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: pool, Size: 1024}).List(ctx)
			n := 0
			for _, r := range rows {
				if r.Held {
					n++
				}
			}
			return n, err
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		gone := b.Open(t)
		gone.Close()
		if _, err := sqlidgen.Lease(ctx, gone, b.Dialect, pool); err == nil || ctx.Err() != nil {
			t.Errorf("Lease on a closed database: %v (ctx %v), want an error", err, ctx.Err())
		}
	})
}
