package idgen

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Config holds a Generator's optional settings; the node id is not one of
// them: [New] takes it as a parameter and [NewLeased] leases it. The zero
// value gives the [Twitter] layout on the system clock, refusing to issue
// IDs while the clock stands behind its last ID.
type Config struct {
	// Layout is the bit layout; the zero Layout means Twitter.
	Layout Layout
	// Rollback decides what happens when the clock steps back; nil makes
	// Next fail with ErrClockBackwards until the clock is back at the time
	// of the last ID issued.
	Rollback RollbackPolicy
	// Clock is the time source; nil means the system clock (the wall
	// clock, read through the monotonic clock and re-read every second).
	Clock Clock
	// Coarse, if positive, trades precision of the time field for speed:
	// the generator reads the time from a clock that a goroutine of its
	// own updates every Coarse, one atomic load instead of a clock read
	// per ID, so the time field may lag by up to Coarse. A new tick cannot
	// start before that clock shows it, so a Coarse longer than the
	// layout's unit lowers the rate at which a full sequence refills.
	// Close stops the goroutine. It excludes Clock.
	Coarse time.Duration
	// Store, if set, keeps the high-water mark across restarts; it is read
	// on the first call to Next. A leased generator keeps it in its lease
	// instead.
	Store HighWaterStore
	// Reserve is how far ahead of the clock each save to Store reaches,
	// so that the store is written about once per Reserve. After a crash
	// the next run's clock stands up to Reserve behind the saved mark, and
	// the rollback policy applies (pair a Store with Wait{Max: Reserve} to
	// wait it out). Default 1s.
	Reserve time.Duration
	// AllowShortLife accepts a layout with fewer than ten years left before
	// its time field runs out. A layout already out of time is refused.
	AllowShortLife bool
}

// defaultReserve is the default Config.Reserve.
const defaultReserve = time.Second

// minLife is the life a layout must have left unless AllowShortLife is set.
const minLife = 10 * year

// Waiting for the next tick: the last spinWindow before it is spent
// spinning (yielding the processor), because the runtime's timers can
// oversleep by a millisecond; longer waits park in steps of at most
// maxPark, re-reading the clock in between.
const (
	spinWindow = 2 * time.Millisecond
	maxPark    = 20 * time.Millisecond
)

// A Generator issues unique, time-ordered IDs for one node. It is safe for
// concurrent use.
//
// The hot path is lock-free and allocation-free: one atomic word holds the
// last ID issued, and each ID is a compare-and-swap of its successor. A new
// tick resets the sequence; a full sequence waits for the next tick (or,
// under [Borrow], takes it early), with one caller spinning through the last
// two milliseconds and the others asleep. Rollbacks, the high-water store
// and switching workers take a mutex.
type Generator struct {
	p      plan
	cfg    Config // defaults filled in
	layout Layout
	// Exactly one of the clocks is set; the concrete ones avoid an
	// interface call on the hot path.
	sys      *systemClock
	coarse   *coarseClock
	clock    Clock
	maxAhead int64 // ticks the time field may run ahead of the clock (Borrow)
	policy   RollbackPolicy
	store    HighWaterStore
	reserve  int64 // ticks

	// limit is the last tick issued without taking the mutex: the end of
	// the time field, or with a store a point before the end of the
	// reservation at which it is renewed early.
	limit atomic.Int64
	// reserved is the last tick covered by the mark saved to the store.
	reserved atomic.Int64

	_ [64]byte // keeps the read-mostly fields above off state's cache line
	// state is the last ID issued, or, at the start, a tick with the
	// generator's node. It only moves forward except through the rollback
	// policies, which keep uniqueness by other means. A closed generator's
	// state is negative.
	state atomic.Int64
	_     [56]byte

	// lease holds the node id of a generator made by NewLeased; nil for
	// a static node.
	lease *leaseHolder
	// closed is set by Close. A negative state means closed, or frozen
	// while the node is being switched: callers then wait on thaw.
	closed atomic.Bool
	thaw   atomic.Pointer[chan struct{}]

	mu     sync.Mutex // serialises the slow paths; guards the fields below
	loaded bool       // the store's mark has been applied
	// used records, per node and generation, the last tick this
	// generator issued with them before moving away.
	used map[nodeGen]int64
	// peak is the highest tick ever issued, which state may fall below
	// after a rollback.
	peak int64

	// At a full sequence one goroutine spins for the next tick; the others
	// block on its channel, which it closes when it is done.
	spinMu   sync.Mutex
	spinDone chan struct{} // nil when nobody spins
}

// New returns a generator issuing IDs with node, 0 to Layout.MaxNode():
// datacenter and worker together (see Layout.NodeOf, NodeFromHostname).
// Every generator issuing IDs at the same time needs its own node; node 0
// is a node like any other (see Node ids in the package documentation;
// [NewLeased] leases a node nobody else holds). Errors wrap
// [ErrInvalidConfig]: a layout that is invalid, has less than ten years
// left or has run out, or a node it cannot hold.
func New(node int64, cfg Config) (*Generator, error) {
	return newGenerator(node, cfg, false)
}

func newGenerator(node int64, cfg Config, leased bool) (*Generator, error) {
	if cfg.Layout == (Layout{}) {
		cfg.Layout = Twitter
	}
	l := cfg.Layout
	if err := l.validate(); err != nil {
		return nil, err
	}
	if err := l.checkNode(node); err != nil {
		return nil, err
	}
	if err := validatePolicy(cfg.Rollback, l, true, leased); err != nil {
		return nil, err
	}
	if cfg.Reserve < 0 {
		return nil, fmt.Errorf("%w: negative Reserve %v", ErrInvalidConfig, cfg.Reserve)
	}
	if cfg.Store != nil && cfg.Reserve == 0 {
		cfg.Reserve = defaultReserve
	}
	g := &Generator{p: l.plan(), cfg: cfg, layout: l, policy: cfg.Rollback, store: cfg.Store, used: make(map[nodeGen]int64)}
	switch {
	case cfg.Coarse < 0 || cfg.Coarse > 0 && cfg.Clock != nil:
		return nil, fmt.Errorf("%w: Coarse %v with Clock %T: want a positive Coarse without a Clock, or none", ErrInvalidConfig, cfg.Coarse, cfg.Clock)
	case cfg.Clock == nil:
		g.sys = newSystemClock()
	default:
		g.clock = cfg.Clock
	}
	now := time.Unix(0, g.nanos())
	if now.Before(l.Epoch) {
		return nil, fmt.Errorf("%w: layout %q starts %s, after the clock", ErrInvalidConfig, l.Name, l.Epoch.Format(time.RFC3339))
	}
	if left := l.endOfLife().Sub(now); left <= 0 {
		return nil, fmt.Errorf("%w: layout %q exhausted: it ended %s", ErrInvalidConfig, l.Name, l.endOfLife().Format(time.RFC3339))
	} else if left < minLife && !cfg.AllowShortLife {
		return nil, fmt.Errorf("%w: layout %q ends %s, %.1f years from now, less than ten (set Config.AllowShortLife to accept it)",
			ErrInvalidConfig, l.Name, l.endOfLife().Format(time.RFC3339), left.Hours()/year.Hours())
	}
	if b, ok := cfg.Rollback.(Borrow); ok {
		g.maxAhead = int64(b.MaxAhead / l.Unit)
	}
	g.limit.Store(g.p.maxTick)
	g.reserved.Store(g.p.maxTick)
	if g.store != nil {
		g.reserve = max(int64(cfg.Reserve/l.Unit), 1)
		// Nothing is issued before the first Next loads the mark.
		g.limit.Store(-1)
		g.reserved.Store(-1)
	}
	g.state.Store(node << g.p.nodeShift)
	if g.store != nil {
		// A full sequence at tick 0 sends even a clock at the epoch
		// through extend, which loads the mark.
		g.state.Store(node<<g.p.nodeShift | g.p.seqMask)
	}
	if cfg.Coarse > 0 {
		g.sys, g.coarse = nil, newCoarseClock(cfg.Coarse)
	}
	return g, nil
}

// Config returns the generator's settings, defaults filled in: its Layout
// decodes its IDs.
func (g *Generator) Config() Config { return g.cfg }

// Node returns the node id the generator issues IDs with; it changes only
// when SwitchWorker switches it.
func (g *Generator) Node() int64 { return g.state.Load() & g.p.nodeMask >> g.p.nodeShift }

// Ahead reports how far the time of the last ID issued runs ahead of the
// clock: up to Borrow's MaxAhead under that policy, and otherwise non-zero
// only while the clock stands behind after a rollback or a restart.
func (g *Generator) Ahead() time.Duration {
	last := g.state.Load() & maxID >> g.p.timeShift
	now := g.tick()
	if d := last - now; d > 0 && now != beforeEpoch {
		return time.Duration(d) * g.layout.Unit
	}
	return 0
}

// Next issues an ID. The context matters only when Next has to wait (for
// the next tick when the sequence is full, or under the Wait policy) or
// reach the store or the leaser. Errors wrap [ErrClockBackwards],
// [ErrInvalidConfig] or [ErrClosed], a context's error, or the
// error of a store or worker source.
func (g *Generator) Next(ctx context.Context) (ID, error) {
	id, _, err := g.issue(ctx, 1)
	return ID(id), err
}

// Fill fills ids with new IDs in increasing order, taking as many as a
// tick's sequence allows with each atomic operation: at a few nanoseconds
// per ID it suits batches of messages. It returns how many it filled, all
// of ids unless an error (as from Next) stops it.
func (g *Generator) Fill(ctx context.Context, ids []ID) (int, error) {
	filled := 0
	for filled < len(ids) {
		last, n, err := g.issue(ctx, int64(len(ids)-filled))
		if err != nil {
			return filled, err
		}
		// The run is consecutive in the sequence field.
		for i := range n {
			ids[filled+int(i)] = ID(last - (n-1-i)*g.p.seqOne)
		}
		filled += int(n)
	}
	return filled, nil
}

// issue issues up to want IDs, at least one, consecutive in one tick's
// sequence: it returns the last of them and their number.
func (g *Generator) issue(ctx context.Context, want int64) (last, n int64, err error) {
	// The clock is read after loading state: the tick in state came from a
	// clock reading made before it was stored, so a reading behind it is a
	// real step back, not a goroutine that read the clock earlier and lost
	// a race.
	old := g.state.Load()
	var now int64
	if c := g.sys; c != nil {
		// The clocks' UnixNano inlined by hand: the calls they save are
		// a tenth of the cost of an ID, and a fifth with a coarse clock.
		mono := int64(time.Since(c.start))
		if mono >= c.resync.Load() {
			c.sync()
		}
		now = g.p.tickOf(c.offset.Load() + mono)
	} else if c := g.coarse; c != nil {
		now = g.p.tickOf(c.now.Load())
	} else {
		now = g.tick()
	}
	for {
		if old < 0 {
			if err := g.awaitThaw(ctx); err != nil {
				return 0, 0, err
			}
			old, now = g.state.Load(), g.tick()
			continue
		}
		tick := old >> (g.p.timeShift & 63)
		var next int64
		switch {
		case now > tick:
			if now > g.limit.Load() {
				if err := g.extend(ctx, now); err != nil {
					return 0, 0, err
				}
			}
			n = min(want, g.p.seqMax+1)
			next = now<<(g.p.timeShift&63) | old&g.p.keepMask | (n-1)<<(g.p.seqShift&63)
		case now < tick-g.maxAhead:
			id, err := g.rollback(ctx, old, now)
			if id >= 0 || err != nil {
				return int64(id), 1, err
			}
			old, now = g.state.Load(), g.tick()
			continue
		case old&g.p.seqMask != g.p.seqMask:
			n = min(want, g.p.seqMax-old&g.p.seqMask>>(g.p.seqShift&63))
			next = old + n*g.p.seqOne
		case tick+1-now <= g.maxAhead: // Borrow: take the next tick early
			if tick+1 > g.limit.Load() {
				if err := g.extend(ctx, tick+1); err != nil {
					return 0, 0, err
				}
			}
			n = min(want, g.p.seqMax+1)
			next = (tick+1)<<(g.p.timeShift&63) | old&g.p.keepMask | (n-1)<<(g.p.seqShift&63)
		default:
			if err := g.waitFull(ctx, tick+1-g.maxAhead); err != nil {
				return 0, 0, err
			}
			old, now = g.state.Load(), g.tick()
			continue
		}
		if g.state.CompareAndSwap(old, next) {
			return next, n, nil
		}
		old = g.state.Load()
		if old>>(g.p.timeShift&63) > now {
			now = g.tick() // the winner may have read the clock after us
		}
	}
}

// nanos reads the clock.
func (g *Generator) nanos() int64 {
	switch {
	case g.sys != nil:
		return g.sys.UnixNano()
	case g.coarse != nil:
		return g.coarse.UnixNano()
	default:
		return g.clock.UnixNano()
	}
}

// tick reads the clock in ticks since the epoch.
func (g *Generator) tick() int64 { return g.p.tickOf(g.nanos()) }

// waitFull waits, at a full sequence, until the clock reaches tick target:
// the first caller spins, the others sleep until it is done and then look
// again, so that many callers at a full sequence keep one processor busy,
// not all of them.
func (g *Generator) waitFull(ctx context.Context, target int64) error {
	g.spinMu.Lock()
	if done := g.spinDone; done != nil {
		g.spinMu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	done := make(chan struct{})
	g.spinDone = done
	g.spinMu.Unlock()

	err := g.waitTick(ctx, target)
	g.spinMu.Lock()
	g.spinDone = nil
	g.spinMu.Unlock()
	close(done)
	return err
}

// waitTick waits until the clock reaches tick target. It returns early if
// the clock steps back while it waits, for Next to consult the policy.
func (g *Generator) waitTick(ctx context.Context, target int64) error {
	done := ctx.Done()
	first := g.nanos()
	for nanos := first; g.p.tickOf(nanos) < target; nanos = g.nanos() {
		if nanos < first {
			return nil
		}
		if d := time.Duration(g.p.nanosOf(target) - nanos); d > spinWindow {
			if err := park(ctx, min(d-spinWindow, maxPark)); err != nil {
				return err
			}
			continue
		}
		if done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		runtime.Gosched()
	}
	return nil
}

// park sleeps for d or until ctx is done.
func park(ctx context.Context, d time.Duration) error {
	if ctx.Done() == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// extend makes tick issuable: it fails past the end of the layout, and with
// a store it loads the mark on first use and renews the reservation.
func (g *Generator) extend(ctx context.Context, tick int64) error {
	if tick > g.p.maxTick {
		return fmt.Errorf("%w: layout %q exhausted: it ended %s", ErrInvalidConfig, g.layout.Name, g.layout.endOfLife().Format(time.RFC3339))
	}
	if g.lease != nil {
		return g.lease.extend(ctx, g, tick)
	}
	if tick <= g.reserved.Load() {
		// Early renewal: one caller writes, the others carry on.
		if !g.mu.TryLock() {
			return nil
		}
	} else {
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if !g.loaded {
		if err := g.load(ctx); err != nil {
			return err
		}
	}
	if tick <= g.limit.Load() {
		return nil
	}
	last := g.state.Load() & maxID >> g.p.timeShift
	to := min(max(tick, last, g.peak)+g.reserve, g.p.maxTick)
	if err := g.store.Save(ctx, time.Unix(0, g.p.nanosOf(to+1))); err != nil {
		if tick <= g.reserved.Load() {
			return nil // covered by the old reservation; retried next tick
		}
		return err
	}
	g.reserved.Store(to)
	g.limit.Store(min(to-g.reserve/2, g.p.maxTick))
	return nil
}

// load applies the store's mark.
func (g *Generator) load(ctx context.Context) error {
	t, err := g.store.Load(ctx)
	if err != nil {
		return err
	}
	g.loaded = true
	g.applyMark(t)
	return nil
}

// applyMark resumes the generator after mark t: every tick before it may
// have been used with the current node, by any generation. Called with mu
// held.
func (g *Generator) applyMark(t time.Time) {
	usedTo := g.tickBefore(t)
	if usedTo < 0 {
		return
	}
	for {
		old := g.state.Load()
		if old < 0 || old>>g.p.timeShift >= usedTo {
			return
		}
		g.markUsed(old&g.p.nodeMask>>g.p.nodeShift, usedTo)
		// A full sequence at usedTo: the next ID takes a later tick.
		if g.state.CompareAndSwap(old, usedTo<<g.p.timeShift|old&g.p.keepMask|g.p.seqMask) {
			return
		}
	}
}

// tickBefore returns the last tick that starts before mark t: IDs with a
// later tick are free. It is -1 for the zero Time or a mark at or before the
// epoch.
func (g *Generator) tickBefore(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	d := t.UnixNano() - g.p.epochNanos
	if d <= 0 {
		return -1
	}
	return (d+g.p.unitNanos-1)/g.p.unitNanos - 1
}

// markUsed records that node may have been used, in every generation, up
// to tick. Called with mu held.
func (g *Generator) markUsed(node, tick int64) {
	if tick < 0 {
		return
	}
	g.peak = max(g.peak, tick)
	for gen := range int64(1) << g.layout.GenerationBits {
		k := nodeGen{node, gen}
		g.used[k] = max(g.used[k], tick)
	}
}

// rollback applies the policy to a clock at tick now behind state old. It
// returns the ID it issued, or -1 for Next to look again.
func (g *Generator) rollback(ctx context.Context, old, now int64) (ID, error) {
	g.mu.Lock()
	locked := true
	defer func() {
		if locked {
			g.mu.Unlock()
		}
	}()
	if g.state.Load() != old {
		return -1, nil
	}
	if g.lease != nil {
		if err := g.lease.live(g); err != nil {
			return 0, err
		}
	}
	if now == beforeEpoch {
		return 0, fmt.Errorf("%w: clock %s before the epoch of layout %q", ErrClockBackwards, time.Unix(0, g.nanos()).UTC().Format(time.RFC3339Nano), g.layout.Name)
	}
	last := old >> g.p.timeShift
	// Under Borrow the generator can go on once the clock is within
	// MaxAhead of the last tick.
	resume := last - g.maxAhead
	behind := time.Duration(last-now) * g.layout.Unit
	for p := g.policy; ; {
		switch q := p.(type) {
		case Borrow:
			p = q.Else
			continue
		case Wait:
			if wait := time.Duration(g.p.nanosOf(resume) - g.nanos()); wait <= q.Max {
				g.mu.Unlock()
				locked = false
				return -1, g.waitTick(ctx, resume)
			}
			p = q.Else
			continue
		case BumpGeneration:
			if id, ok := g.bump(old, now); ok {
				return id, nil // -1 if state moved meanwhile
			}
			p = q.Else
			continue
		case SwitchWorker:
			// The switch calls the leaser: it takes the holder's turn,
			// not mu, so that callers behind it honour their contexts.
			g.mu.Unlock()
			locked = false
			return -1, g.lease.switchFrom(ctx, g, old)
		}
		return 0, fmt.Errorf("%w: node %d: clock %v behind the last ID", ErrClockBackwards, old&g.p.nodeMask>>g.p.nodeShift, behind)
	}
}

// nodeGen keys the ticks used per node and generation.
type nodeGen struct{ node, gen int64 }

func (g *Generator) nodeGenOf(state int64) nodeGen {
	return nodeGen{state & g.p.nodeMask >> g.p.nodeShift, state & g.p.genMask >> g.p.genShift}
}

// replace makes next, the first ID of a tick with another node or
// generation, the last ID issued in place of old; it reports false if old is
// no longer current. Called with mu held.
func (g *Generator) replace(old, next int64) bool {
	if !g.state.CompareAndSwap(old, next) {
		return false
	}
	g.retire(old)
	return true
}

// bump moves to the next generation whose IDs all lie before now. It returns
// ok false if there is none, and ID -1 if old is no longer current.
func (g *Generator) bump(old, now int64) (id ID, ok bool) {
	n := int64(1) << g.layout.GenerationBits
	cur := g.nodeGenOf(old)
	for i := int64(1); i < n; i++ {
		cand := nodeGen{cur.node, (cur.gen + i) % n}
		if last, used := g.used[cand]; used && last >= now {
			continue
		}
		next := now<<g.p.timeShift | old&g.p.nodeMask | cand.gen<<g.p.genShift
		if !g.replace(old, next) {
			return -1, true
		}
		return ID(next), true
	}
	return 0, false
}

// freeze stops every caller from issuing IDs until unfreeze, and returns
// the last ID issued; ok is false if the generator is closed. Called with mu
// held.
func (g *Generator) freeze() (last int64, ok bool) {
	ch := make(chan struct{})
	g.thaw.Store(&ch)
	for {
		old := g.state.Load()
		if old < 0 {
			g.thaw.Store(nil)
			close(ch)
			return 0, false
		}
		// The sign bit fails every compare-and-swap in flight.
		if g.state.CompareAndSwap(old, old|^maxID) {
			return old, true
		}
	}
}

// unfreeze makes next the last ID issued and lets callers go on, unless
// Close came first: it has let them go, to fail. Called with mu held, after
// freeze.
func (g *Generator) unfreeze(next int64) {
	if g.closed.Load() {
		return
	}
	g.state.Store(next)
	if ch := g.thaw.Swap(nil); ch != nil {
		close(*ch)
	}
}

// awaitThaw waits while the generator is frozen; it fails on a closed one.
func (g *Generator) awaitThaw(ctx context.Context) error {
	if g.closed.Load() {
		return ErrClosed
	}
	ch := g.thaw.Load()
	if ch == nil {
		// Between the freezer's Store and its compare-and-swap, or just
		// thawed: look again.
		runtime.Gosched()
		return nil
	}
	select {
	case <-*ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retire records that the node and generation of last were used up to its
// tick. Called with mu held.
func (g *Generator) retire(last int64) {
	tick, k := last>>g.p.timeShift, g.nodeGenOf(last)
	g.used[k] = max(g.used[k], tick)
	g.peak = max(g.peak, tick)
}

// markOf returns the end of the last tick in which the generator issued IDs
// with node, or the zero Time if it never did. Called with mu held.
func (g *Generator) markOf(node int64) time.Time {
	last := int64(-1)
	if s := g.state.Load() & maxID; s&g.p.nodeMask>>g.p.nodeShift == node {
		last = s >> g.p.timeShift
	}
	for k, t := range g.used {
		if k.node == node {
			last = max(last, t)
		}
	}
	if last < 0 {
		return time.Time{}
	}
	return time.Unix(0, g.p.nanosOf(last+1))
}

// Close stops the generator: Next then fails with ErrClosed. With a store
// it saves the exact mark (the end of the last tick issued), so that a
// restart need not wait out the reservation; a leased generator stops
// renewing and releases its lease with that mark, so that the next holder
// of its node can start at once. It does not close the store. It is safe to
// call more than once.
func (g *Generator) Close() error {
	g.mu.Lock()
	if g.closed.Swap(true) {
		g.mu.Unlock()
		return nil
	}
	if g.coarse != nil {
		defer g.coarse.close()
	}
	var old int64
	for {
		old = g.state.Load()
		// Setting the sign bit fails every compare-and-swap still in
		// flight, so nothing is issued after the mark is taken.
		if old < 0 || g.state.CompareAndSwap(old, old|^maxID) {
			break
		}
	}
	if ch := g.thaw.Swap(nil); ch != nil {
		close(*ch)
	}
	var mark time.Time
	if g.lease != nil {
		mark = g.markOf(old & g.p.nodeMask >> g.p.nodeShift)
	}
	save := g.store != nil && g.loaded
	last := max(old&maxID>>g.p.timeShift, g.peak)
	g.mu.Unlock()
	if g.lease != nil {
		return g.lease.close(g, mark)
	}
	if !save {
		return nil
	}
	return g.store.Save(context.Background(), time.Unix(0, g.p.nanosOf(last+1)))
}
