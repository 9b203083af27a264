package testkit

import (
	"context"
	"testing"

	"github.com/idemq/idemq/idgen"
)

// Generator returns a generator on node with cfg, closed when tb ends.
func Generator(tb testing.TB, node int64, cfg idgen.Config) *idgen.Generator {
	tb.Helper()
	g, err := idgen.New(node, cfg)
	if err != nil {
		tb.Fatalf("idgen.New: %v", err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// Next takes an ID from g (a generator, a cached one, a segment
// allocator), failing tb if it cannot.
func Next[T any](tb testing.TB, g interface {
	Next(context.Context) (T, error)
}) T {
	tb.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		tb.Fatalf("Next: %v", err)
	}
	return id
}
