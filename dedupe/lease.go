package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// keeper keeps alive the leases of every fn a Guard runs, on one timer for
// the whole Guard rather than one per call: most handlers end long before
// their first extension is due, and then a lease has cost a link in a list.
// The timer fires when the earliest lease is due; an extension runs on a
// goroutine of its own, so that a store slow to answer for one key delays
// no other key's extension. It also holds the contexts of fns whose claim
// it does not extend (run without a claim under FailOpen, or held by a
// row lock in the transactional mode), so that Interrupt reaches every
// running fn; those
// never set the timer.
type keeper struct {
	store       Store
	lease       time.Duration
	extendEvery time.Duration

	mu    sync.Mutex
	head  *lease      // the registered leases, linked through prev and next
	timer *time.Timer // made on first use
	armed bool        // the timer is set to fire at at
	at    time.Time
	// interrupted is Interrupt's cause, nil until it is called.
	interrupted error
}

// lease is an item of [Guard.Do] whose fn is to run: its
// claim, what the keeper needs to keep the claim alive, and what Do learns
// of the item. It is the context fn runs with: Do's context, carrying the
// claim, cancelled once the lease is lost, Interrupt is called or fn has
// returned. That cancellation is made on demand, by the first call of Done
// or by the cancellation itself: a handler that never asks for Done costs
// no cancel context.
type lease struct {
	parent context.Context
	// c is fn's claim: zero when fn runs without one (FailOpen), which
	// hides a claim that Do's context may carry from an outer Guard.
	c claim
	// kept: the keeper extends the claim, a Guard's. Not when fn runs
	// without a claim, nor in the transactional mode, whose row lock holds
	// the key.
	kept bool

	mu    sync.Mutex // guards making inner and setting ended
	inner atomic.Pointer[cancelable]
	ended bool // fn has returned: the context is done

	// Guarded by the keeper's mu.
	prev, next *lease
	listed     bool
	// due is when the keeper looks at the lease next.
	due time.Time
	// held is when the lease held for sure; it holds until held+Lease.
	held time.Time
	// lastErr is why the last extension failed.
	lastErr error
	lost    bool
	ext     *extension // the extension under way, if any

	// Do's record of the item: its index, whether fn ran, fn's error or
	// why it did not run.
	i      int
	ran    bool
	err    error
	notRun Outcome // when !ran
}

// cancelable is a lease's context once it can be cancelled.
type cancelable struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// extension is one Extend call under way.
type extension struct {
	ctx   context.Context
	abort context.CancelFunc
	done  chan struct{}
}

// errNoAnswer is a lease's lastErr until an extension fails.
var errNoAnswer = errors.New("no answer")

// closed is the Done of a lease whose fn returned before anyone asked.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

var _ context.Context = (*lease)(nil)

func (l *lease) Deadline() (time.Time, bool) { return l.parent.Deadline() }

func (l *lease) Done() <-chan struct{} {
	if c := l.inner.Load(); c != nil {
		return c.ctx.Done()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return closed
	}
	return l.cancelable().ctx.Done()
}

func (l *lease) Err() error {
	if c := l.inner.Load(); c != nil {
		return c.ctx.Err()
	}
	l.mu.Lock()
	ended := l.ended
	l.mu.Unlock()
	if ended {
		return context.Canceled
	}
	return l.parent.Err()
}

// Value answers the claim, and otherwise asks the context that cancels it,
// once there is one, so that context.Cause finds the lease's cause.
func (l *lease) Value(key any) any {
	if key == (claimKey{}) {
		return &l.c
	}
	if c := l.inner.Load(); c != nil {
		return c.ctx.Value(key)
	}
	return l.parent.Value(key)
}

// cancelable returns l's cancelable context, made now if need be. l.mu
// must be held.
func (l *lease) cancelable() *cancelable {
	c := l.inner.Load()
	if c == nil {
		c = new(cancelable)
		c.ctx, c.cancel = context.WithCancelCause(l.parent)
		l.inner.Store(c)
	}
	return c
}

// cancel cancels l's context with cause, unless fn has returned.
func (l *lease) cancel(cause error) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	c := l.cancelable()
	l.mu.Unlock()
	c.cancel(cause)
}

// end marks fn returned: l's context is done from now on.
func (l *lease) end() {
	l.mu.Lock()
	l.ended = true
	c := l.inner.Load()
	l.mu.Unlock()
	if c != nil {
		c.cancel(nil)
	}
}

// add registers ls, whose claims were taken at or after start (or which
// run without one), and sets the timer if one is due before it fires.
func (k *keeper) add(ls []lease, start time.Time) {
	k.mu.Lock()
	cause := k.interrupted
	first := time.Time{}
	for n := range ls {
		l := &ls[n]
		l.held, l.due, l.lastErr = start, start.Add(k.extendEvery), errNoAnswer
		l.prev, l.next, l.listed = nil, k.head, true
		if k.head != nil {
			k.head.prev = l
		}
		k.head = l
		if l.kept && (first.IsZero() || l.due.Before(first)) {
			first = l.due
		}
	}
	if !first.IsZero() {
		k.arm(first)
	}
	k.mu.Unlock()
	if cause != nil {
		for n := range ls {
			ls[n].cancel(cause)
		}
	}
}

// remove unregisters ls, aborts their extensions under way and waits for
// them to return, and ends their contexts. The timer is left to fire: if
// no lease is due then, it does nothing, and it costs nothing meanwhile.
func (k *keeper) remove(ls []lease) {
	var wait []*extension
	k.mu.Lock()
	for n := range ls {
		l := &ls[n]
		if !l.listed {
			continue
		}
		if l.prev != nil {
			l.prev.next = l.next
		} else {
			k.head = l.next
		}
		if l.next != nil {
			l.next.prev = l.prev
		}
		l.prev, l.next, l.listed = nil, nil, false
		if l.ext != nil {
			l.ext.abort()
			wait = append(wait, l.ext)
		}
	}
	k.mu.Unlock()
	for _, x := range wait {
		<-x.done
	}
	for n := range ls {
		ls[n].end()
	}
}

// arm sets the timer to fire at t unless it fires earlier. k.mu must be
// held.
func (k *keeper) arm(t time.Time) {
	if k.armed && !t.Before(k.at) {
		return
	}
	k.armed, k.at = true, t
	d := time.Until(t)
	if k.timer == nil {
		k.timer = time.AfterFunc(d, k.tick)
		return
	}
	k.timer.Reset(d)
}

// tick gives up the leases that no extension has held for a whole lease
// (the store may have let them go), starts an extension of every other
// lease that is due, and sets the timer for the next.
func (k *keeper) tick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.armed = false
	now := time.Now()
	next := time.Time{}
	for l := k.head; l != nil; l = l.next {
		if !l.kept || l.lost || l.ext != nil {
			// An extension under way sets the timer once it returns.
			continue
		}
		if !now.Before(l.due) {
			if !now.Before(l.held.Add(k.lease)) {
				l.lost = true
				l.cancel(fmt.Errorf("%w: %s not extended for %v: %w", ErrLeaseLost, l.c.ticket.Ref, k.lease, l.lastErr))
				continue
			}
			k.startExtend(l)
			l.due = now.Add(k.extendEvery)
		}
		if next.IsZero() || l.due.Before(next) {
			next = l.due
		}
	}
	if !next.IsZero() {
		k.arm(next)
	}
}

// startExtend starts extending l once. k.mu must be held.
func (k *keeper) startExtend(l *lease) {
	// Do's context without its cancellation: the lease is kept while fn
	// runs, even after the caller's ctx ended (fn may not have noticed
	// yet). An answer after the lease has ended is of no use.
	ctx, abort := context.WithDeadline(context.WithoutCancel(l.parent), l.held.Add(k.lease))
	x := &extension{ctx: ctx, abort: abort, done: make(chan struct{})}
	l.ext = x
	go k.extend(l, x)
}

// extend extends l once, as x, and notes the answer.
func (k *keeper) extend(l *lease, x *extension) {
	defer close(x.done)
	sent := time.Now()
	// Sent even if x was aborted or its deadline passed before it
	// started: a store answers such a call at once, changing nothing.
	err := k.store.Extend(x.ctx, l.c.ticket, k.lease)
	x.abort()
	k.mu.Lock()
	defer k.mu.Unlock()
	l.ext = nil
	if !l.listed {
		return // fn has returned
	}
	switch {
	case err == nil:
		l.held = sent
	case errors.Is(err, ErrLeaseLost):
		l.lost = true
		l.cancel(err)
		return
	default:
		// Keep trying until the lease may have ended.
		l.lastErr = err
	}
	if end := l.held.Add(k.lease); end.Before(l.due) {
		l.due = end
	}
	k.arm(l.due)
}

// interrupt cancels, with cause, the contexts of the registered leases and
// of those registered from now on.
func (k *keeper) interrupt(cause error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.interrupted != nil {
		return
	}
	k.interrupted = cause
	for l := k.head; l != nil; l = l.next {
		l.cancel(cause)
	}
}
