package sqlidgen_test

import (
	"context"
	"testing"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/leasetest"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/testdb"
)

func TestConformance(t *testing.T) {
	for _, b := range append(testdb.Backends, testdb.MySQLOptions) {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			// One database per dialect: the suite keeps its tests apart
			// by pool, and the leasers of every pool share the table.
			db := b.Open(t)
			newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "migrate", Size: 1})
			leasetest.Run(t, func(t *testing.T, p leasetest.Pool) idgen.Leaser {
				l, err := sqlidgen.New(db, b.Dialect, sqlidgen.Config{Pool: p.Name, Size: p.Size, Lease: p.TTL})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, owner)
		})
	}
}

// owner reads the owner of node's live lease from List.
func owner(ctx context.Context, l idgen.Leaser, node int64) (string, error) {
	rows, err := l.(*sqlidgen.Leaser).List(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range rows {
		if r.Node == node && r.Held {
			return r.Owner, nil
		}
	}
	return "", nil
}
