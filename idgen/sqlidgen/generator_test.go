package sqlidgen_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/idgen/sqlidgen"
	"github.com/idemq/idemq/internal/testdb"
)

// TestNewLeased runs generators on leased nodes: they hold different nodes,
// a third finds none free, and the one that takes over a released node
// issues IDs after every ID its previous holder issued.
func TestNewLeased(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			// Nothing here waits for a lease to end (Close releases the
			// node): a long lease keeps a loaded machine's pause between
			// the acquire and its first renewal (over 2 s once, at load
			// 19) from losing it.
			l := newLeaser(t, db, b.Dialect, sqlidgen.Config{Pool: "gens", Size: 2, Lease: time.Minute})
			cfg, lc := idgen.Config{Layout: idgen.Twitter}, idgen.LeaseConfig{Owner: "test"}
			g1, err := idgen.NewLeased(t.Context(), l, cfg, lc)
			if err != nil {
				t.Fatal(err)
			}
			g2, err := idgen.NewLeased(t.Context(), l, cfg, lc)
			if err != nil {
				t.Fatal(err)
			}
			defer g2.Close()
			if g1.Node() == g2.Node() {
				t.Fatalf("both generators on node %d", g1.Node())
			}
			if _, err := idgen.NewLeased(t.Context(), l, cfg, lc); !errors.Is(err, idgen.ErrNoFreeNode) {
				t.Fatalf("third generator = %v, want ErrNoFreeNode", err)
			}
			var last idgen.ID
			for range 10000 {
				if last, err = g1.Next(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if err := g1.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			g3, err := idgen.NewLeased(t.Context(), l, cfg, lc)
			if err != nil {
				t.Fatal(err)
			}
			defer g3.Close()
			if g3.Node() != g1.Node() {
				t.Fatalf("new generator on node %d, want the released node %d", g3.Node(), g1.Node())
			}
			id, err := g3.Next(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Errorf("new holder of node %d issued %v, not after the last ID %v of the previous holder", g3.Node(), id, last)
			}
		})
	}
}

// TestNewLeasedWorkerNodes runs generators on uid-generator's table: each
// start takes the next id for good, and the start past the layout's node
// ids fails.
func TestNewLeasedWorkerNodes(t *testing.T) {
	for _, b := range testdb.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			db := b.Open(t)
			w := newWorkerNodes(t, db, b.Dialect, "")
			layout := idgen.Layout{Epoch: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Unit: time.Second, TimeBits: 31, WorkerBits: 2, SequenceBits: 13}
			cfg := idgen.Config{Layout: layout}
			for want := int64(1); want <= layout.MaxNode(); want++ {
				g, err := idgen.NewLeased(t.Context(), w, cfg, idgen.LeaseConfig{})
				if err != nil {
					t.Fatalf("start %d: %v", want, err)
				}
				if g.Node() != want {
					t.Errorf("start %d on node %d", want, g.Node())
				}
				if _, err := g.Next(t.Context()); err != nil {
					t.Error(err)
				}
				if err := g.Close(); err != nil {
					t.Errorf("Close = %v", err)
				}
			}
			_, err := idgen.NewLeased(t.Context(), w, cfg, idgen.LeaseConfig{})
			if !errors.Is(err, idgen.ErrInvalidConfig) {
				t.Fatalf("start past the layout = %v, want ErrInvalidConfig", err)
			}
			t.Logf("start past the layout: %v", err)
		})
	}
}
