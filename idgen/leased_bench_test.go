package idgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
	"github.com/idemq/idemq/internal/memidgen"
)

// benchLayout has 20 sequence bits, so that the cost of issuing an ID, not
// the sequence, limits the rate.
var benchLayout = idgen.Layout{
	Name: "wide", TimeBits: 41, WorkerBits: 2, SequenceBits: 20,
	Unit: time.Millisecond, Epoch: idgen.Twitter.Epoch,
}

// BenchmarkLeased compares a generator on a leased node, renewing a short
// lease in the background, with a static one: renewals stay off the hot
// path, so the two cost the same per ID.
func BenchmarkLeased(b *testing.B) {
	static := func(b *testing.B) *idgen.Generator {
		g, err := idgen.New(1, idgen.Config{Layout: benchLayout})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	leased := func(b *testing.B) *idgen.Generator {
		pool, err := memidgen.New(memidgen.Config{Size: 4, Lease: 300 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		g, err := idgen.NewLeased(context.Background(), pool, idgen.Config{Layout: benchLayout}, idgen.LeaseConfig{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	for _, bc := range []struct {
		name string
		gen  func(*testing.B) *idgen.Generator
	}{{"idemq-leased", leased}, {"static", static}} {
		b.Run(bc.name, func(b *testing.B) {
			g := bc.gen(b)
			defer g.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
