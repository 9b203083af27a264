package dedupe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/idemq/idemq/internal/dedupekit"
)

// maxGroupCommit caps the items of one coalesced round trip; calls queued
// beyond it go in the next. It matches the rows sqldedupe writes in one
// statement (more take several statements in a transaction), and it bounds
// how long a round trip takes, so that a backlog is answered in steps rather
// than all at the end of one huge script or statement. A call with more
// items than this is a batch already and goes straight to the store.
const maxGroupCommit = 256

// maxInFlight caps the round trips of one kind in flight at a time. More
// than one would overlap a lane's idle gaps between an answer and the next
// send, but measured on 2 cores with 20 goroutines (BenchmarkPath on Redis,
// MariaDB and PostgreSQL, redisdedupe's BenchmarkGroupCommit) it did not
// pay: with 2 the round trips per message nearly doubled (0.31 to 0.55 on
// Redis) as each carried half the calls, and throughput against the naive
// consumer was no better (Redis 1.08 and 0.87 of naive against 1.10 and
// 0.85 with 1, PostgreSQL 0.76 and 1.02 against 1.14 and 1.06); with 4 and
// 8 it was worse (Redis 0.76 and 0.51 in one run), the extra round trips
// costing more CPU than the overlap saved. Fewer, fuller round trips win.
const maxInFlight = 1

// withGroupCommit returns a Store whose Claim, Complete and Release calls
// from concurrent goroutines are coalesced into one store round trip per
// kind (the [GuardConfig.GroupCommit] setting). A push consumer runs its
// handlers on many goroutines, each delivering one message; coalescing
// their claims and completions is what makes the per-message path cheaper
// than a naive claim and mark per message.
//
// # Coalescing
//
// There is no timer and no goroutine while the store is idle. A call made
// while nothing of its kind is queued and no round trip of its kind is in
// flight is sent at once, on the caller's goroutine and with its context, so
// an idle consumer waits for nothing. Other calls queue up; when the round
// trip returns, everything queued (up to 256 items, the rest in the next
// round trip) is sent as one call, so round trips never queue behind
// each other: at most one claim, one complete and one release round trip
// are in flight at a time (a limit measured to beat two or more, which
// coalesce less). Queued calls are sent not by one of their callers but by
// a goroutine that a round trip before them starts and that ends as soon as
// nothing is queued: a caller that sent a shared round trip itself could not
// return before its answer, and every caller must be able to return as soon
// as its context ends. Calls are coalesced only with others of equal lease
// or retention. Extend, calls the store would refuse as a whole (a non-positive
// lease or retention) and calls of more than 256 items go straight to
// the store.
//
// # Semantics
//
// Answers are those of the [Store] contract, as if the calls were made one
// after another in the order they queued: within one round trip a key
// claimed twice is Acquired for the first call and Busy for the second.
// (Were several round trips of a kind in flight at once, their calls would
// be concurrent calls, applied in either order, as without the wrapper:
// none of their callers would have returned.) Per-item errors
// ([msgkey.ErrInvalid], [ErrLeaseLost]) go to their own caller only. An error of
// the whole round trip goes to every caller in it, wrapped with what failed;
// as for any store error, the outcome of the writes is unknown.
//
// A call whose context is done before its request is sent changes nothing
// and returns an error wrapping ctx.Err(). A call whose context ends once
// its request is sent returns at once with an error wrapping ctx.Err(), its
// outcome unknown. One caller's context never cancels a round trip that
// other callers still wait for: the round trip runs with the values of its
// first caller's context, the latest of its callers' deadlines (none if one
// of them has none), and is cancelled once every caller in it has gone.
//
// # Deferred completions
//
// A Guard with [GuardConfig.LateFailure] turns on deferral
// (deferCompletions): Complete then answers nil at once and the
// completions go later (see deferral), and their failures go to
// LateFailure. Complete then no longer answers as the [Store] contract
// says, which is why only a Guard, which reports them, turns it on. The
// only timer is a deferral's on a [CompleteClaimer], armed while a
// completion waits for a claim to ride with.
func withGroupCommit(store Store) *groupCommit {
	g := &groupCommit{store: store}
	g.claims = lane[Item, ClaimResult]{
		kind:    "claim",
		results: true,
		batch: func(ctx context.Context, items []Item, lease time.Duration) ([]ClaimResult, []error, error) {
			if g.late != nil {
				if ts, retention := g.late.take(); len(ts) > 0 {
					return g.late.ride(ctx, ts, retention, items, lease)
				}
			}
			return store.Claim(ctx, items, lease)
		},
	}
	g.completes = lane[Ticket, struct{}]{
		kind: "completion",
		batch: func(ctx context.Context, ts []Ticket, retention time.Duration) ([]struct{}, []error, error) {
			errs, err := store.Complete(ctx, ts, retention)
			return nil, errs, err
		},
	}
	g.releases = lane[Ticket, struct{}]{
		kind: "release",
		batch: func(ctx context.Context, ts []Ticket, _ time.Duration) ([]struct{}, []error, error) {
			errs, err := store.Release(ctx, ts)
			return nil, errs, err
		},
	}
	return g
}

// deferCompletions makes g answer completions before it records them,
// reporting to report those the store then fails, with the outcome Do
// would have answered (LeaseLost or Unrecorded); timeout bounds each of
// their round trips. Only a Guard turns it on: its tickets are valid.
func (g *groupCommit) deferCompletions(report func(Ref, Result), timeout time.Duration) {
	d := &deferral{store: g.store, report: report, timeout: timeout}
	if r, ok := g.store.(CompleteClaimer); ok {
		d.rider = r
		d.timer = time.AfterFunc(time.Hour, d.fire)
		d.timer.Stop()
	}
	g.late = d
}

// flush waits until the completions g answered are recorded, or ctx ends.
func (g *groupCommit) flush(ctx context.Context) error {
	if g.late == nil {
		return nil
	}
	return g.late.flush(ctx)
}

// groupCommit is the Store withGroupCommit returns: a lane per kind of
// coalesced call, and the completions answered before they are recorded
// (nil unless deferred).
type groupCommit struct {
	store     Store
	claims    lane[Item, ClaimResult]
	completes lane[Ticket, struct{}]
	releases  lane[Ticket, struct{}]
	late      *deferral
}

var _ Store = (*groupCommit)(nil)

// Claim implements [Store]. With deferred completions, a claim of a key
// whose completion this store answered but has not recorded yet waits
// for that completion's round trip first, so that it finds the key done,
// as it would have without deferral, rather than busy under its own
// process's lease.
func (g *groupCommit) Claim(ctx context.Context, items []Item, lease time.Duration) ([]ClaimResult, []error, error) {
	if g.late != nil {
		if err := g.late.awaitRefs(ctx, items); err != nil {
			return nil, nil, fmt.Errorf("dedupe: group commit: claim: wait for the completion of a key claimed again: %w", err)
		}
	}
	if lease <= 0 {
		return g.store.Claim(ctx, items, lease)
	}
	return g.claims.many(ctx, items, lease)
}

// Complete implements [Store]. With deferred completions it answers at
// once, unless the deferred queue is full, the retention is another than
// the queue's or the call is refused as a whole: then it waits for its
// round trip as without deferral.
func (g *groupCommit) Complete(ctx context.Context, ts []Ticket, retention time.Duration) ([]error, error) {
	if retention <= 0 {
		return g.store.Complete(ctx, ts, retention)
	}
	if g.late != nil && len(ts) > 0 && g.late.add(ctx, ts, retention) {
		return dedupekit.NoErrors(len(ts)), nil
	}
	_, errs, err := g.completes.many(ctx, ts, retention)
	return errs, err
}

// Release implements [Store].
func (g *groupCommit) Release(ctx context.Context, ts []Ticket) ([]error, error) {
	_, errs, err := g.releases.many(ctx, ts, 0)
	return errs, err
}

// Extend implements [Store]; it is never coalesced.
func (g *groupCommit) Extend(ctx context.Context, t Ticket, lease time.Duration) error {
	return g.store.Extend(ctx, t, lease)
}

// lane coalesces the calls of one kind: requests Q answered by results R,
// with an argument (the lease of claims, the retention of completions) that
// calls must share to share a round trip.
type lane[Q, R any] struct {
	kind    string // what a call does, for errors
	results bool   // batch answers a result per item
	batch   func(ctx context.Context, qs []Q, arg time.Duration) ([]R, []error, error)

	// Guarded by mu. Calls queue only when maxInFlight round trips are in
	// flight: whenever inFlight drops below it, what is queued is sent.
	mu       sync.Mutex
	inFlight int             // round trips in flight, at most maxInFlight
	queue    []*call[Q, R]   // calls waiting for the next round trip, in order
	spare    []*call[Q, R]   // queue's previous backing array
	free     []*call[Q, R]   // answered calls, for reuse
	flights  []*flight[Q, R] // flights not in the air, for reuse
}

// flight is a round trip of queued calls, its sender's alone once taken
// off the queue.
type flight[Q, R any] struct {
	sent  []*call[Q, R] // its calls, in order
	items []Q           // their items, in order
	ctx   context.Context
	trip  *trip // nil for a round trip of one call, sent with its context
	arg   time.Duration
}

// call is one caller's request waiting in a lane.
type call[Q, R any] struct {
	ctx   context.Context
	items []Q
	arg   time.Duration
	done  chan struct{}

	// Guarded by the lane's mu.
	state callState
	trip  *trip

	// Set by the sender before it signals done.
	res  []R
	errs []error
	err  error
}

type callState uint8

const (
	queued callState = iota // waiting; not sent
	sent                    // in the round trip in flight
	gone                    // its caller returned early
)

// trip is a round trip of several calls: it is cancelled when the last of
// them has gone.
type trip struct {
	waiting int // guarded by the lane's mu
	cancel  context.CancelFunc
}

// sendNow reports whether a call may be sent at once, and if so counts its
// round trip in flight. It is called with l.mu held; if it reports true it
// releases it.
func (l *lane[Q, R]) sendNow() bool {
	if len(l.queue) > 0 || l.inFlight >= maxInFlight {
		return false
	}
	l.inFlight++
	l.mu.Unlock()
	return true
}

// many runs a batch of requests as one call: at once when nothing is
// queued and fewer than maxInFlight round trips of the lane are in flight,
// else in a later one.
func (l *lane[Q, R]) many(ctx context.Context, qs []Q, arg time.Duration) ([]R, []error, error) {
	if len(qs) == 0 || len(qs) > maxGroupCommit {
		return l.batch(ctx, qs, arg)
	}
	l.mu.Lock()
	if l.sendNow() {
		defer l.handOff()
		return l.batch(ctx, qs, arg)
	}
	c, err := l.enqueue(ctx, arg, qs)
	if err != nil {
		return nil, nil, err
	}
	if !l.wait(c) {
		return nil, nil, l.leave(c)
	}
	res, errs, err := c.res, c.errs, c.err
	l.recycle(c)
	if err != nil {
		return nil, nil, err
	}
	return res, errs, nil
}

// enqueue queues a call of qs. It is called with l.mu held and releases
// it.
func (l *lane[Q, R]) enqueue(ctx context.Context, arg time.Duration, qs []Q) (*call[Q, R], error) {
	if err := ctx.Err(); err != nil {
		l.mu.Unlock()
		return nil, l.callErr("not sent", qs, err)
	}
	var c *call[Q, R]
	if n := len(l.free); n > 0 {
		c, l.free[n-1] = l.free[n-1], nil
		l.free = l.free[:n-1]
	} else {
		c = &call[Q, R]{done: make(chan struct{}, 1)}
	}
	c.ctx, c.arg, c.state, c.items = ctx, arg, queued, qs
	l.queue = append(l.queue, c)
	l.mu.Unlock()
	return c, nil
}

// maxFree bounds the answered calls a lane keeps for reuse.
const maxFree = 64

// recycle keeps c, whose caller has read its answer, for another call.
func (l *lane[Q, R]) recycle(c *call[Q, R]) {
	c.ctx, c.items, c.res, c.errs, c.err, c.trip = nil, nil, nil, nil, nil, nil
	l.mu.Lock()
	if len(l.free) < maxFree {
		l.free = append(l.free, c)
	}
	l.mu.Unlock()
}

// wait waits for c's answer or for the end of its context, whichever comes
// first, and reports whether c was answered: then c.err, or c.res and
// c.errs, hold the answer.
func (l *lane[Q, R]) wait(c *call[Q, R]) bool {
	select {
	case <-c.done:
		return true
	case <-c.ctx.Done():
	}
	select {
	case <-c.done: // answered meanwhile
		return true
	default:
		return false
	}
}

// leave takes c, whose context has ended, out of its lane and returns its
// error. Once sent, its answer is no longer awaited; the round trip is
// cancelled if nobody else awaits it.
func (l *lane[Q, R]) leave(c *call[Q, R]) error {
	l.mu.Lock()
	state := c.state
	c.state = gone
	switch {
	case state == queued:
		if i := slices.Index(l.queue, c); i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
		}
	case c.trip != nil:
		if c.trip.waiting--; c.trip.waiting == 0 {
			c.trip.cancel()
		}
	}
	l.mu.Unlock()
	what := "not sent"
	if state == sent {
		what = "sent, outcome unknown"
	}
	return l.callErr(what, c.items, c.ctx.Err())
}

// callErr is the error of a call of qs that ended with err.
func (l *lane[Q, R]) callErr(what string, qs []Q, err error) error {
	if len(qs) == 1 {
		return fmt.Errorf("dedupe: group commit: %s %s: %s: %w", l.kind, describe(qs[0]), what, err)
	}
	return fmt.Errorf("dedupe: group commit: %s batch of %d: %s: %w", l.kind, len(qs), what, err)
}

// describe names the key of a request.
func describe(q any) string {
	switch q := q.(type) {
	case Item:
		return fmt.Sprintf("%q", q.Ref)
	case Ticket:
		return fmt.Sprintf("%q", q.Ref)
	}
	return fmt.Sprint(q)
}

// handOff ends a round trip sent on its caller's goroutine: calls queued
// meanwhile go to a sender goroutine.
func (l *lane[Q, R]) handOff() {
	l.mu.Lock()
	l.inFlight--
	f := l.dispatch()
	l.mu.Unlock()
	if f != nil {
		go l.send(f)
	}
}

// dispatch takes queued calls off the queue into flights while fewer than
// maxInFlight round trips are in flight, counting each in flight. It
// starts a sender goroutine for every flight but the first, which it
// returns for its caller to send (nil if nothing was queued). It is called
// with l.mu held.
func (l *lane[Q, R]) dispatch() *flight[Q, R] {
	var first *flight[Q, R]
	for len(l.queue) > 0 && l.inFlight < maxInFlight {
		f := l.next()
		if f == nil {
			break
		}
		l.inFlight++
		if first == nil {
			first = f
		} else {
			go l.send(f)
		}
	}
	return first
}

// send sends f, then what is queued, one round trip after another, until
// nothing is.
func (l *lane[Q, R]) send(f *flight[Q, R]) {
	for f != nil {
		l.roundTrip(f)
		if f.trip != nil {
			f.trip.cancel()
		}
		clear(f.sent)
		f.sent = f.sent[:0]
		clear(f.items)
		f.items = f.items[:0]
		f.ctx, f.trip = nil, nil
		l.mu.Lock()
		l.flights = append(l.flights, f)
		l.inFlight--
		f = l.dispatch()
		l.mu.Unlock()
	}
}

// next takes the calls of the next round trip off the queue into a flight,
// with the context to send them with and the trip that context belongs to
// (nil for a round trip of one call, sent with its caller's context). It
// returns nil when nothing is left to send. It is called with l.mu held.
func (l *lane[Q, R]) next() *flight[Q, R] {
	var f *flight[Q, R]
	if n := len(l.flights); n > 0 {
		f, l.flights[n-1] = l.flights[n-1], nil
		l.flights = l.flights[:n-1]
	} else {
		f = new(flight[Q, R])
	}
	var arg time.Duration
	rest, full := l.spare[:0], false
	for _, c := range l.queue {
		switch {
		case c.state == gone:
			continue
		case c.ctx.Err() != nil:
			// Its caller has not noticed yet; it will, and return an
			// error: nothing was sent.
			continue
		case len(f.sent) == 0:
			arg = c.arg
		case full || c.arg != arg || len(f.items)+len(c.items) > maxGroupCommit:
			// Calls of another retention keep their place; once one call
			// does not fit, neither do the ones after it.
			full = full || c.arg == arg
			rest = append(rest, c)
			continue
		}
		c.state = sent
		f.sent = append(f.sent, c)
		f.items = append(f.items, c.items...)
	}
	clear(l.queue)
	l.spare, l.queue = l.queue[:0], rest
	f.arg = arg
	switch len(f.sent) {
	case 0:
		l.flights = append(l.flights, f)
		return nil
	case 1:
		f.ctx = f.sent[0].ctx
		return f
	}
	// Values of the first caller's context; the latest deadline, if all
	// have one; cancelled when the last caller has gone.
	var (
		latest time.Time
		all    = true
	)
	for _, c := range f.sent {
		d, ok := c.ctx.Deadline()
		all = all && ok
		if d.After(latest) {
			latest = d
		}
	}
	base := context.WithoutCancel(f.sent[0].ctx)
	var cancel context.CancelFunc
	if all {
		f.ctx, cancel = context.WithDeadline(base, latest)
	} else {
		f.ctx, cancel = context.WithCancel(base)
	}
	f.trip = &trip{waiting: len(f.sent), cancel: cancel}
	for _, c := range f.sent {
		c.trip = f.trip
	}
	return f
}

// roundTrip sends f's items in one batch call and answers its calls.
func (l *lane[Q, R]) roundTrip(f *flight[Q, R]) {
	res, errs, err := l.batch(f.ctx, f.items, f.arg)
	if err == nil && ((l.results && len(res) != len(f.items)) || len(errs) != len(f.items)) {
		err = fmt.Errorf("store answered %d results and %d errors for %d items", len(res), len(errs), len(f.items))
	}
	if err != nil {
		err = fmt.Errorf("dedupe: group commit: %s batch of %d from %d calls: %w", l.kind, len(f.items), len(f.sent), err)
	}
	o := 0
	for _, c := range f.sent {
		k := len(c.items)
		if err != nil {
			c.err = err
		} else {
			if l.results {
				c.res = res[o : o+k : o+k]
			}
			c.errs = errs[o : o+k : o+k]
		}
		o += k
		c.done <- struct{}{}
	}
}

// maxDeferred bounds the completions a deferral holds, queued or in their
// round trip: the records a kill -9 can lose beyond those of the handlers
// running, each a message whose effect may run again on its redelivery.
// With 20 handler goroutines on Redis a claim round trip carries about 10
// messages' completions (0.10 round trips per message in redisdedupe's
// BenchmarkGroupCommit); the bound is reached only when the store slows
// down, and then completions wait for their round trip as without
// deferral.
const maxDeferred = 64

// rideWait is how long a deferred completion waits for a claim to ride
// with, on a [CompleteClaimer], before it goes alone: a serial consumer's
// next message comes sooner while messages flow, and an idle one's last
// completion is not held longer.
const rideWait = time.Millisecond

// deferral holds the completions a groupCommit answered before the store
// recorded them ([GuardConfig.LateFailure]).
//
// On a [CompleteClaimer] they ride with the next claim round trip, in one
// call, or go alone once rideWait has passed without one (or a claim of
// one of their keys, or a flush, needs them recorded now). On any other
// store the first goes at once, on a goroutine of its own, and those added
// while it is in flight go together in the next round trip, as in a lane:
// a serial consumer's next claim is then sent while its last completion
// is in flight. Either way a goroutine sends only while something is
// queued, and a serial consumer waits for one round trip per message
// instead of two.
type deferral struct {
	store   Store
	rider   CompleteClaimer // the store, if it is one
	timer   *time.Timer     // fires rideWait after a completion queued; with rider only
	report  func(Ref, Result)
	timeout time.Duration // bounds each round trip

	mu        sync.Mutex
	queue     []Ticket        // answered, not sent yet
	sending   []Ticket        // in the round trip in flight
	retention time.Duration   // of every ticket queued or sending
	ctx       context.Context // the first queued caller's, for its values
	sender    bool            // a goroutine, or a claim, sends
	started   uint64          // round trips sent so far
	landed    uint64          // round trips answered so far
	// tick, when someone waits, is closed when a round trip lands.
	tick chan struct{}
}

// add queues ts to be completed with retention, and reports whether it
// did: not when the deferral is full or holds another retention.
func (d *deferral) add(ctx context.Context, ts []Ticket, retention time.Duration) bool {
	d.mu.Lock()
	held := len(d.queue) + len(d.sending)
	if held+len(ts) > maxDeferred || (held > 0 && retention != d.retention) {
		d.mu.Unlock()
		return false
	}
	first := len(d.queue) == 0
	if first {
		d.ctx = ctx
	}
	d.retention = retention
	d.queue = append(d.queue, ts...)
	if d.rider != nil {
		// A claim takes them, or the timer sends them. While a round
		// trip carries others, its end arms the timer.
		if first && !d.sender {
			d.timer.Reset(rideWait)
		}
		d.mu.Unlock()
		return true
	}
	start := !d.sender
	d.sender = true
	d.mu.Unlock()
	if start {
		go d.send()
	}
	return true
}

// fire sends what is queued when no claim took it in time.
func (d *deferral) fire() {
	d.mu.Lock()
	if len(d.queue) == 0 || d.sender {
		d.mu.Unlock()
		return
	}
	d.sender = true
	d.mu.Unlock()
	d.send()
}

// kick starts sending what is queued now, unless something sends already.
// It is called with d.mu held.
func (d *deferral) kick() {
	if len(d.queue) > 0 && !d.sender {
		d.sender = true
		go d.send()
	}
}

// take hands what is queued to a claim round trip to carry, unless
// something sends already; it returns nothing then, or when nothing is
// queued.
func (d *deferral) take() ([]Ticket, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queue) == 0 || d.sender {
		return nil, 0
	}
	d.sender = true
	d.sending, d.queue = d.queue, d.sending[:0]
	d.ctx = nil
	d.started++
	return d.sending, d.retention
}

// ride sends ts, taken from the queue, with a claim of items in one call,
// and returns the claim's answer once it has reported the completions
// that failed.
func (d *deferral) ride(ctx context.Context, ts []Ticket, retention time.Duration, items []Item, lease time.Duration) ([]ClaimResult, []error, error) {
	done, doneErr, res, errs, err := d.rider.CompleteClaim(ctx, ts, retention, items, lease)
	if doneErr != nil && !errors.Is(doneErr, ErrLeaseLost) {
		// Retried once, alone: rare, for the claim usually failed
		// too.
		d.complete(ctx, ts, retention, 1)
	} else {
		d.answered(ts, done, doneErr)
	}
	d.mu.Lock()
	d.land()
	d.sender = false
	if len(d.queue) > 0 {
		d.timer.Reset(rideWait)
	}
	d.mu.Unlock()
	return res, errs, err
}

// land ends the round trip of what was sending. It is called with d.mu
// held.
func (d *deferral) land() {
	clear(d.sending)
	d.sending = d.sending[:0]
	d.landed++
	if d.tick != nil {
		close(d.tick)
		d.tick = nil
	}
}

// send sends what is queued, one round trip after another, until nothing
// is.
func (d *deferral) send() {
	d.mu.Lock()
	for len(d.queue) > 0 {
		d.sending, d.queue = d.queue, d.sending[:0]
		ts, ctx, retention := d.sending, d.ctx, d.retention
		d.ctx = nil
		d.started++
		d.mu.Unlock()
		d.complete(ctx, ts, retention, 2)
		d.mu.Lock()
		d.land()
	}
	d.sender = false
	d.mu.Unlock()
}

// complete records ts in up to tries round trips, and reports those it
// could not. The callers have their answers already: the round trip runs
// on the values of the first one's context alone, bounded by the timeout,
// and a failure is tried again, as [Guard.Do] retries once (the same
// tokens make it safe). As in Do, a context that can never be cancelled
// (rocketmq-client-go's) is used as it is, bounded by the store client's
// own timeouts: no timer per round trip.
func (d *deferral) complete(ctx context.Context, ts []Ticket, retention time.Duration, tries int) {
	if ctx.Done() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), d.timeout)
		defer cancel()
	}
	errs, err := d.store.Complete(ctx, ts, retention)
	for tries--; tries > 0 && err != nil && !errors.Is(err, ErrLeaseLost) && ctx.Err() == nil; tries-- {
		errs, err = d.store.Complete(ctx, ts, retention)
	}
	d.answered(ts, errs, err)
}

// answered reports the completions of ts that the store's answer, errs
// and err, says failed.
func (d *deferral) answered(ts []Ticket, errs []error, err error) {
	if err == nil && len(errs) != len(ts) {
		err = fmt.Errorf("store answered %d errors for %d tickets", len(errs), len(ts))
	}
	for i, t := range ts {
		e := err
		if e == nil {
			e = errs[i]
		}
		if e == nil {
			continue
		}
		r := Result{Outcome: Unrecorded}
		if errors.Is(e, ErrLeaseLost) {
			r.Outcome = LeaseLost
		}
		r.Err = fmt.Errorf("dedupe: complete %s after its answer: %w", t.Ref, e)
		d.report(t.Ref, r)
	}
}

// awaitRefs waits until no item's key has a completion queued or in
// flight, or ctx ends.
func (d *deferral) awaitRefs(ctx context.Context, items []Item) error {
	d.mu.Lock()
	if len(d.queue)+len(d.sending) == 0 {
		d.mu.Unlock()
		return nil
	}
	var until uint64
	for _, it := range items {
		if holds(d.queue, it.Ref) {
			// Sent now, or once what is sending lands.
			d.kick()
			until = d.started + 1
			break
		}
		if holds(d.sending, it.Ref) {
			until = d.started
		}
	}
	return d.await(ctx, until)
}

// holds reports whether ts hold a ticket of ref.
func holds(ts []Ticket, ref Ref) bool {
	for i := range ts {
		if ts[i].Key == ref.Key && ts[i].Ref == ref {
			return true
		}
	}
	return false
}

// flush waits until every completion added so far is answered by the
// store (and, failed, reported), or ctx ends.
func (d *deferral) flush(ctx context.Context) error {
	d.mu.Lock()
	until := d.started
	if len(d.queue) > 0 {
		until++
		d.kick()
	}
	if err := d.await(ctx, until); err != nil {
		return fmt.Errorf("dedupe: group commit: flush deferred completions: %w", err)
	}
	return nil
}

// await waits until round trip n has landed, or ctx ends. It is called
// with d.mu held and releases it.
func (d *deferral) await(ctx context.Context, n uint64) error {
	for d.landed < n {
		if d.tick == nil {
			d.tick = make(chan struct{})
		}
		tick := d.tick
		d.mu.Unlock()
		select {
		case <-tick:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		d.mu.Lock()
	}
	d.mu.Unlock()
	return nil
}
