package leasetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemq/idemq/idgen"
)

// gate wraps the leaser under test to stop or fail the next call of a
// method the test names: faults injected around a real store, the way
// pebble's errorfs wraps a real file system. It counts the leases granted,
// and the renewals and releases that found their lease lost.
type gate struct {
	idgen.Leaser
	mu      sync.Mutex
	holds   map[string]*hold // by method, for its next call
	faults  map[string]error // by method, for its next call
	all     []*hold
	granted int
	lost    []error
}

// A hold stops the call it was set for until the test lets it go.
type hold struct {
	reached chan struct{} // closed when the call arrives
	release chan struct{}
	once    sync.Once
}

// let lets the held call go on; it may be called more than once.
func (h *hold) let() { h.once.Do(func() { close(h.release) }) }

func newGate(l idgen.Leaser) *gate {
	return &gate{Leaser: l, holds: map[string]*hold{}, faults: map[string]error{}}
}

// hold stops the next call of method, before it reaches the store, until
// the hold is let go.
func (g *gate) hold(method string) *hold {
	h := &hold{reached: make(chan struct{}), release: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds[method] = h
	g.all = append(g.all, h)
	return h
}

// fail makes the next call of method reach the store and then fail with
// err, as when its reply is lost.
func (g *gate) fail(method string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults[method] = err
}

// letAll lets every held call go on, for a test that ends early.
func (g *gate) letAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.all {
		h.let()
	}
}

// enter starts a call of method: it waits at a hold set for it and
// returns the fault set for it, if any.
func (g *gate) enter(method string) error {
	g.mu.Lock()
	h, fault := g.holds[method], g.faults[method]
	delete(g.holds, method)
	delete(g.faults, method)
	g.mu.Unlock()
	if h != nil {
		close(h.reached)
		<-h.release
	}
	return fault
}

// leave ends a call: it counts a lost lease and applies the fault.
func (g *gate) leave(err, fault error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if errors.Is(err, idgen.ErrLeaseLost) {
		g.lost = append(g.lost, err)
	}
	if err == nil {
		return fault
	}
	return err
}

func (g *gate) Acquire(ctx context.Context, req idgen.LeaseRequest) (idgen.Lease, error) {
	fault := g.enter("Acquire")
	l, err := g.Leaser.Acquire(ctx, req)
	if err == nil {
		g.mu.Lock()
		g.granted++
		g.mu.Unlock()
	}
	return l, g.leave(err, fault)
}

func (g *gate) Renew(ctx context.Context, l idgen.Lease, highWater time.Time) (idgen.Lease, error) {
	fault := g.enter("Renew")
	renewed, err := g.Leaser.Renew(ctx, l, highWater)
	if err = g.leave(err, fault); err != nil {
		return idgen.Lease{}, err
	}
	return renewed, nil
}

func (g *gate) Release(ctx context.Context, l idgen.Lease, highWater time.Time) error {
	fault := g.enter("Release")
	return g.leave(g.Leaser.Release(ctx, l, highWater), fault)
}

// grants returns how many leases Acquire granted so far.
func (g *gate) grants() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.granted
}

// lostCalls returns the renewals and releases that found their lease lost.
func (g *gate) lostCalls() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]error(nil), g.lost...)
}
