package idgen_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemq/idemq/idgen"
)

// fakeClock is a Clock that tests set and step. With a positive step every
// reading advances it, so a generator spinning for a tick sees one come; a
// running clock also moves with real time, so that a generator parking for
// a tick sees it come after its sleep.
type fakeClock struct {
	ns      atomic.Int64
	step    int64
	running bool
	start   time.Time
}

func newFakeClock(t time.Time, step time.Duration) *fakeClock {
	c := &fakeClock{step: int64(step)}
	c.Set(t)
	return c
}

func newRunningClock(t time.Time) *fakeClock {
	c := &fakeClock{running: true, start: time.Now()}
	c.Set(t)
	return c
}

func (c *fakeClock) elapsed() int64 {
	if c.running {
		return int64(time.Since(c.start))
	}
	return 0
}

func (c *fakeClock) UnixNano() int64     { return c.ns.Add(c.step) - c.step + c.elapsed() }
func (c *fakeClock) Set(t time.Time)     { c.ns.Store(t.UnixNano() - c.elapsed()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()+c.elapsed()) }

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

// checkUnique fails the test if ids holds a duplicate.
func checkUnique(t *testing.T, ids []idgen.ID) {
	t.Helper()
	s := slices.Clone(ids)
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			t.Fatalf("duplicate ID %d among %d", s[i], len(s))
		}
	}
}

// checkIncreasing fails the test unless ids increase strictly.
func checkIncreasing(t *testing.T, ids []idgen.ID) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ID %d: %d after %d", i, ids[i], ids[i-1])
		}
	}
}
