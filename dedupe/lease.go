package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// keeper keeps the leases of one [Guard.Do] alive while its handlers run.
// It runs on a timer rather than a goroutine of its own: most handlers end
// before the first extension is due, and then it has cost a timer.
type keeper struct {
	g *Guard
	// ctx is Do's context without its cancellation: the leases are kept
	// while fn runs, even after the caller's ctx ended (fn may not have
	// noticed yet).
	ctx context.Context
	ls  []lease

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	// ticking is closed when the tick under way ends; abort ends the
	// extension it waits for.
	ticking chan struct{}
	abort   context.CancelFunc
}

// lease is a claim that a keeper keeps alive, and the context its handler
// runs with.
type lease struct {
	hctx   claimContext
	cancel context.CancelCauseFunc
	// held is when the lease held for sure; it holds until held+Lease.
	held time.Time
	// lastErr is why the last extension failed.
	lastErr error
	lost    bool
}

// errNoAnswer is a lease's lastErr until an extension fails.
var errNoAnswer = errors.New("no answer")

// keep starts keeping the leases of held, taken at or after start.
func (g *Guard) keep(ctx context.Context, held []heldItem, start time.Time) *keeper {
	k := &keeper{g: g, ctx: context.WithoutCancel(ctx), ls: make([]lease, len(held))}
	for n, h := range held {
		l := &k.ls[n]
		var cctx context.Context
		cctx, l.cancel = context.WithCancelCause(ctx)
		l.hctx = claimContext{Context: cctx, c: claim{ticket: h.t}}
		l.held, l.lastErr = start, errNoAnswer
	}
	k.mu.Lock()
	k.timer = time.AfterFunc(g.cfg.ExtendEvery, k.tick)
	k.mu.Unlock()
	return k
}

// context is the context the handler of held item n runs with.
func (k *keeper) context(n int) context.Context { return &k.ls[n].hctx }

// stop ends the extensions, waits for one under way, and releases the
// handlers' contexts.
func (k *keeper) stop() {
	k.mu.Lock()
	k.stopped = true
	k.timer.Stop()
	ticking := k.ticking
	if k.abort != nil {
		k.abort()
	}
	k.mu.Unlock()
	if ticking != nil {
		<-ticking
	}
	for n := range k.ls {
		k.ls[n].cancel(nil)
	}
}

// tick extends every live lease once, loses those that the store says are
// lost or that no extension has held for a whole lease (the store may have
// let them go), and sets the timer for the next extension or deadline.
// The store has no batch Extend: the leases are extended one after another,
// each call bounded by its lease's end.
func (k *keeper) tick() {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	ectx, abort := context.WithCancel(k.ctx)
	ticking := make(chan struct{})
	k.ticking, k.abort = ticking, abort
	k.mu.Unlock()

	lease := k.g.cfg.Lease
	now := time.Now()
	next := now.Add(k.g.cfg.ExtendEvery)
	live := false
	for n := range k.ls {
		l := &k.ls[n]
		if l.lost {
			continue
		}
		if !now.Before(l.held.Add(lease)) {
			l.lose(fmt.Errorf("%w: %s not extended for %v: %w", ErrLeaseLost, l.hctx.c.ticket.Ref, lease, l.lastErr))
			continue
		}
		if ectx.Err() != nil {
			// stop aborted this tick: the handlers are done.
			live = true
			continue
		}
		k.extend(ectx, l)
		if !l.lost {
			live = true
			if end := l.held.Add(lease); end.Before(next) {
				next = end
			}
		}
	}

	k.mu.Lock()
	k.ticking, k.abort = nil, nil
	if !k.stopped && live {
		k.timer.Reset(time.Until(next))
	}
	k.mu.Unlock()
	abort()
	close(ticking)
}

// extend extends l once.
func (k *keeper) extend(ctx context.Context, l *lease) {
	sent := time.Now()
	// An answer after the lease has ended is of no use.
	ectx, cancel := context.WithDeadline(ctx, l.held.Add(k.g.cfg.Lease))
	err := k.g.store.Extend(ectx, l.hctx.c.ticket, k.g.cfg.Lease)
	cancel()
	switch {
	case err == nil:
		l.held = sent
	case errors.Is(err, ErrLeaseLost):
		l.lose(err)
	default:
		// Keep trying until the lease may have ended.
		l.lastErr = err
	}
}

// lose marks l lost and cancels its handler's context with cause.
func (l *lease) lose(cause error) {
	l.lost = true
	l.cancel(cause)
}
