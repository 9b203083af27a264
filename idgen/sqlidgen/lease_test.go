package sqlidgen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/testdb"
)

// TestLease checks the sender's one call on each database: it creates the
// table, two generators hold two nodes of the pool, each released on
// Close, and a missing setting is refused with an error that names it.
func TestLease(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			db := b.Open(t)
			const pool = "senders"
			x, err := sqlidgen.Lease(ctx, db, b.Dialect, pool)
			if err != nil {
				t.Fatal(err)
			}
			y, err := sqlidgen.Lease(ctx, db, b.Dialect, pool)
			if err != nil {
				t.Fatal(err)
			}
			if x.Node() == y.Node() {
				t.Fatalf("two leases share node %d", x.Node())
			}
			l := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: pool, Size: 1024})
			held := func() int {
				rows, err := l.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, r := range rows {
					if r.Held {
						n++
					}
				}
				return n
			}
			if n := held(); n != 2 {
				t.Fatalf("%d leases held, want 2", n)
			}
			for _, g := range []interface{ Close() error }{x, y} {
				if err := g.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if n := held(); n != 0 {
				t.Fatalf("%d leases held after Close, want 0", n)
			}
			if _, err := sqlidgen.Lease(ctx, db, b.Dialect, ""); err == nil || !strings.Contains(err.Error(), "Pool") {
				t.Errorf("Lease without a pool: %v, want an error naming Pool", err)
			}
			// The database gone: an error at once, not a wait for ctx.
			gone := b.Open(t)
			gone.Close()
			if _, err := sqlidgen.Lease(ctx, gone, b.Dialect, pool); err == nil || ctx.Err() != nil {
				t.Errorf("Lease on a closed database: %v (ctx %v), want an error", err, ctx.Err())
			}
		})
	}
}
