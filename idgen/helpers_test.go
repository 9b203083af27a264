package idgen_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
)

// t0 is a tick boundary of every layout the tests use, well inside their
// lives.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newGen(t *testing.T, node int64, cfg idgen.Config) *idgen.Generator {
	t.Helper()
	g, err := idgen.New(node, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func next(t *testing.T, g *idgen.Generator) idgen.ID {
	t.Helper()
	id, err := g.Next(context.Background())
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return id
}
