package idgen

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBufferEmpty is what a [Cached] generator configured with
// [FailWhenEmpty] returns when Next finds no ID buffered: its padding has
// not caught up with the callers (or the generator behind it cannot issue
// IDs; the error then wraps the generator's too). Retry later, enlarge the
// buffer, or use [WaitWhenEmpty].
var ErrBufferEmpty = errors.New("idgen: cached ID buffer empty")

// EmptyPolicy decides what [Cached.Next] does when the buffer is empty:
// uid-generator's RejectedTakeBufferHandler.
type EmptyPolicy int

const (
	// WaitWhenEmpty makes Next wait for the padding, for as long as its
	// context allows. It is the default.
	WaitWhenEmpty EmptyPolicy = iota
	// FailWhenEmpty makes Next fail at once with [ErrBufferEmpty].
	FailWhenEmpty
)

// CachedConfig holds a [Cached] generator's optional settings. The zero
// value gives uid-generator's defaults: a buffer of eight ticks' worth of
// IDs, padded when fewer than half remain, no scheduled padding, and Next
// waiting when the buffer is empty.
type CachedConfig struct {
	// Size is the number of slots, a power of two. Default the layout's
	// IDs per tick times 8 (uid-generator's boostPower 3): 32768 for
	// Twitter, 65536 for UIDGenerator.
	Size int
	// PaddingPercent starts a padding when fewer than this share of the
	// slots, in percent from 1 to 100, remain buffered after a take.
	// Default 50 (uid-generator's paddingFactor).
	PaddingPercent int
	// PaddingInterval, if positive, also pads the buffer this often,
	// whether or not it fell under the threshold (uid-generator's
	// scheduleInterval). Default 0: off.
	PaddingInterval time.Duration
	// WhenEmpty decides what Next does when no ID is buffered. Default
	// WaitWhenEmpty.
	WhenEmpty EmptyPolicy
}

// Defaults of CachedConfig.
const (
	// DefaultBoostPower makes the default Size the layout's IDs per tick
	// shifted left by it.
	DefaultBoostPower = 3
	// DefaultPaddingPercent is the default CachedConfig.PaddingPercent.
	DefaultPaddingPercent = 50
)

// maxCachedSize bounds CachedConfig.Size: 8 GiB of slots.
const maxCachedSize = 1 << 30

// padChunk is the most IDs the padder writes before it publishes them, so
// that a caller waiting on an empty buffer is served after a few
// microseconds rather than after a whole buffer.
const padChunk = 512

// closedBit, set in head by Close, makes every take miss: a head beyond any
// tail sends callers to the slow path, which reports ErrClosed, so that the
// hot path needs no closed flag of its own.
const closedBit = 1 << 62

// emptySpins is how many times a caller finding the buffer empty yields
// before it parks: a padder in the middle of a chunk publishes within
// microseconds, and parking costs about as much.
const emptySpins = 16

// Cached is seed 003's CachedUidGenerator (Baidu uid-generator): a ring
// buffer of IDs issued ahead of time by a [Generator], which a background
// padder refills, so that Next costs a few atomic operations and never
// waits for the clock while the buffer holds IDs. It is safe for concurrent
// use.
//
// The ring has Size slots and two positions: tail, one past the last ID
// padded, and head, the next to take. Next reads the slot at head and moves
// head on with a compare-and-swap; the padder writes only slots between
// tail and head plus Size, so a successful compare-and-swap proves the slot
// read was not overwritten. The two positions sit on separate cache lines
// (uid-generator's PaddedAtomicLong). When a take leaves fewer than
// PaddingPercent of the slots buffered, or every PaddingInterval, the
// padder tops the buffer up: in chunks, each one Generator call per tick.
//
// The padder writes only free slots and is the only writer, so the buffer
// never overflows: uid-generator's RejectedPutBufferHandler, which handles
// a put into a full ring (its threshold-triggered and scheduled paddings
// race there), has no counterpart. Its RejectedTakeBufferHandler is
// [CachedConfig].WhenEmpty.
//
// # Borrowed time
//
// A buffer holds several ticks' worth of IDs, more than the clock allows
// in one tick, so the generator must run under [Borrow]: padding a whole
// buffer then takes the next ticks early instead of waiting for each, and
// runs ahead of the clock by at most Borrow.MaxAhead. Once that far ahead,
// the padder waits for the clock, and callers that empty the buffer wait
// (or fail) with it: the rate of IDs over time is still the layout's.
//
// The trade-off: an ID's time field is when it was padded, not when it was
// taken. It may lie up to MaxAhead after the take (borrowed), or before it
// by as long as the ID sat in the buffer; IDs are unique, and each caller
// gets them in the order the generator issued them, but their time is only
// approximately the take's. IDs still buffered at Close are lost: nobody
// ever issues them, since the generator's high-water mark (its
// [HighWaterStore] or its lease) covers every ID it issued, borrowed ones
// included, and a restart starts after it. After a crash the mark stands
// further ahead (by Config.Reserve, or a lease's window): a restart whose
// clock is more than MaxAhead behind it goes to Borrow's Else, so give it
// one that waits, e.g. Borrow{MaxAhead: m, Else: Wait{Max: time.Second}}.
//
// # Defaults
//
// The zero [CachedConfig] gives uid-generator's: Size the layout's IDs per
// tick times 8 (Twitter: 32768 slots, 8ms of IDs, so Borrow.MaxAhead of at
// least 8ms), padding when fewer than 50% remain, no scheduled padding,
// and Next waiting, within its context, when the buffer is empty.
type Cached struct {
	g         *Generator
	mask      int64
	size      int64
	threshold int64 // pad when a take leaves at most this many buffered
	policy    EmptyPolicy
	slots     []atomic.Int64
	seqOne    int64

	_ [64]byte // keeps the read-mostly fields above off head's cache line
	// head is the position of the next ID to take; closedBit once closed.
	head atomic.Int64
	_    [56]byte
	// tail is one past the position of the last ID padded. Only the
	// padder writes it.
	tail atomic.Int64
	_    [56]byte

	// wanted is set by the take that asks for a padding and cleared by
	// the padder when it has padded, so that takes under the threshold
	// send on wake once per padding, not once each.
	wanted atomic.Bool
	wake   chan struct{}

	// Callers waiting on an empty buffer count themselves in waiters and
	// wait for the channel in ready, which the padder closes and replaces
	// after publishing IDs or failing to.
	waiters atomic.Int64
	ready   atomic.Pointer[chan struct{}]
	padErr  atomic.Pointer[error] // the padder's last failure; nil after a success

	newest    atomic.Int64 // the last ID padded
	pads      atomic.Uint64
	empties   atomic.Uint64
	interval  time.Duration
	cancel    context.CancelFunc
	stop      chan struct{} // closed by Close: stops the padder, wakes waiters
	done      chan struct{} // closed when the padder has returned
	closeOnce sync.Once
	closeErr  error
}

// CachedStats reports a Cached generator's state; see [Cached.Stats].
type CachedStats struct {
	// Size is the number of slots.
	Size int
	// Buffered is the number of IDs padded and not yet taken: those a
	// Close now would lose.
	Buffered int
	// Taken and Padded count the IDs taken and padded since the start.
	Taken, Padded int64
	// Pads counts padding rounds: at the threshold, on schedule, or for a
	// caller finding the buffer empty.
	Pads uint64
	// Empty counts the calls to Next that found the buffer empty and
	// waited or failed (uid-generator's rejected takes).
	Empty uint64
	// Newest is the last ID padded.
	Newest ID
	// Ahead is how far Newest's time runs ahead of the clock: at most
	// the generator's Borrow.MaxAhead.
	Ahead time.Duration
}

// NewCached returns a Cached generator drawing IDs from g, which it owns
// from then on: its Close closes g. The generator's rollback policy must be
// [Borrow] with a MaxAhead of at least the time one buffer of IDs spans
// (Size over the layout's IDs per tick, in ticks); for a leased generator
// the lease less its margin must exceed MaxAhead by two ticks, so that IDs
// borrowed that far stay inside the window a renewal opens. NewCached pads
// the buffer once before it returns, within ctx, so that a generator that
// cannot issue IDs (a store held by another process, a clock behind the
// mark) fails here. On error g is left open, the caller's to close. Errors
// wrap [ErrInvalidConfig] or those of [Generator.Next].
func NewCached(ctx context.Context, g *Generator, cfg CachedConfig) (*Cached, error) {
	if g == nil {
		return nil, fmt.Errorf("idgen: NewCached without a Generator: %w", ErrInvalidConfig)
	}
	perTick := g.p.seqMax + 1
	size := int64(cfg.Size)
	if size == 0 {
		size = min(perTick<<DefaultBoostPower, maxCachedSize)
	}
	pct := cfg.PaddingPercent
	if pct == 0 {
		pct = DefaultPaddingPercent
	}
	unit := g.layout.Unit
	span := (size + perTick - 1) / perTick // ticks one buffer spans
	borrow, isBorrow := g.policy.(Borrow)
	switch {
	case size < 2 || size > maxCachedSize || bits.OnesCount64(uint64(size)) != 1:
		return nil, fmt.Errorf("idgen: CachedConfig.Size %d is not a power of two from 2 to 2^30: %w", cfg.Size, ErrInvalidConfig)
	case pct < 0 || pct > 100:
		return nil, fmt.Errorf("idgen: CachedConfig.PaddingPercent %d is outside 1 to 100: %w", cfg.PaddingPercent, ErrInvalidConfig)
	case cfg.PaddingInterval < 0:
		return nil, fmt.Errorf("idgen: negative CachedConfig.PaddingInterval %v: %w", cfg.PaddingInterval, ErrInvalidConfig)
	case cfg.WhenEmpty != WaitWhenEmpty && cfg.WhenEmpty != FailWhenEmpty:
		return nil, fmt.Errorf("idgen: unknown CachedConfig.WhenEmpty %d: %w", cfg.WhenEmpty, ErrInvalidConfig)
	case !isBorrow:
		return nil, fmt.Errorf("idgen: NewCached: the generator's rollback policy is %T, not Borrow, so padding would wait for the clock at every tick; make it with Config.Rollback: idgen.Borrow{MaxAhead: %v} or more: %w",
			g.policy, time.Duration(span)*unit, ErrInvalidConfig)
	case g.maxAhead < span:
		return nil, fmt.Errorf("idgen: NewCached: Borrow.MaxAhead %v is shorter than the %v one buffer of %d IDs spans at %d IDs per %v; raise MaxAhead or lower CachedConfig.Size: %w",
			borrow.MaxAhead, time.Duration(span)*unit, size, perTick, unit, ErrInvalidConfig)
	}
	if h := g.lease; h != nil {
		g.mu.Lock()
		ttl := h.cur.TTL
		g.mu.Unlock()
		if win := h.window(ttl); ttl > 0 && win < borrow.MaxAhead+2*unit {
			return nil, fmt.Errorf("idgen: NewCached: a lease of %v less its margin leaves a window of %v, too short to borrow Borrow.MaxAhead %v ahead of the clock; lengthen the leaser's lease or lower MaxAhead: %w",
				ttl, win, borrow.MaxAhead, ErrInvalidConfig)
		}
	}
	c := &Cached{
		g:         g,
		mask:      size - 1,
		size:      size,
		threshold: max(size*int64(pct)/100, 1),
		policy:    cfg.WhenEmpty,
		slots:     make([]atomic.Int64, size),
		seqOne:    g.p.seqOne,
		wake:      make(chan struct{}, 1),
		interval:  cfg.PaddingInterval,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	ready := make(chan struct{})
	c.ready.Store(&ready)
	if err := c.fill(ctx); err != nil {
		return nil, fmt.Errorf("idgen: NewCached: first padding: %w", err)
	}
	padCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(padCtx)
	return c, nil
}

// Layout returns the generator's layout.
func (c *Cached) Layout() Layout { return c.g.layout }

// Decode splits an ID into its fields by the generator's layout.
func (c *Cached) Decode(id ID) Parts { return c.g.layout.Decode(id) }

// NextID is Next with a background context.
func (c *Cached) NextID() (ID, error) { return c.Next(context.Background()) }

// Next takes the next buffered ID. While the buffer holds IDs it is a few
// atomic operations and allocates nothing; the context matters only when
// the buffer is empty and WhenEmpty is WaitWhenEmpty. Errors wrap
// [ErrBufferEmpty] (with FailWhenEmpty), [ErrClosed], a context's error, or
// the generator's error that stopped the padding.
func (c *Cached) Next(ctx context.Context) (ID, error) {
	if id, ok := c.take(); ok {
		return id, nil
	}
	return c.next(ctx)
}

// take takes the ID at head unless the buffer is empty (or closed: the
// closed bit puts head past every tail).
func (c *Cached) take() (ID, bool) {
	for {
		h := c.head.Load()
		t := c.tail.Load()
		if h >= t {
			return 0, false
		}
		id := c.slots[h&c.mask].Load()
		if c.head.CompareAndSwap(h, h+1) {
			if t-h <= c.threshold && !c.wanted.Load() {
				c.askPadding()
			}
			return ID(id), true
		}
	}
}

// askPadding wakes the padder unless a padding was asked for already.
func (c *Cached) askPadding() {
	if c.wanted.CompareAndSwap(false, true) {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// next is Next on an empty buffer, or a closed generator.
func (c *Cached) next(ctx context.Context) (ID, error) {
	if c.head.Load()&closedBit != 0 {
		return 0, fmt.Errorf("idgen: cached generator: %w", ErrClosed)
	}
	c.empties.Add(1)
	c.askPadding()
	if c.policy == FailWhenEmpty {
		if id, ok := c.take(); ok {
			return id, nil
		}
		if p := c.padErr.Load(); p != nil {
			return 0, fmt.Errorf("idgen: cached generator: %w: padding failed: %w", ErrBufferEmpty, *p)
		}
		return 0, fmt.Errorf("idgen: cached generator: %w: padding has not caught up with the callers", ErrBufferEmpty)
	}
	for range emptySpins {
		if id, ok := c.take(); ok {
			return id, nil
		}
		runtime.Gosched()
	}
	c.waiters.Add(1)
	defer c.waiters.Add(-1)
	for {
		// The channel is loaded before the buffer is looked at, so that a
		// padding published after the look closes it.
		ready := *c.ready.Load()
		if id, ok := c.take(); ok {
			return id, nil
		}
		if c.head.Load()&closedBit != 0 {
			return 0, fmt.Errorf("idgen: cached generator: %w", ErrClosed)
		}
		// Asked again now that this call counts as waiting: a padding
		// that ended before it did notified nobody.
		c.askPadding()
		select {
		case <-ready:
			if id, ok := c.take(); ok {
				return id, nil
			}
			// Only a failure that came after this call began is
			// reported: an older one may have been cured since.
			if p := c.padErr.Load(); p != nil {
				return 0, fmt.Errorf("idgen: cached generator: pad the buffer: %w", *p)
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("idgen: cached generator: waiting for padding: %w", ctx.Err())
		case <-c.stop:
			return 0, fmt.Errorf("idgen: cached generator: %w", ErrClosed)
		}
	}
}

// run is the padder: it pads when asked to and on schedule until Close.
func (c *Cached) run(ctx context.Context) {
	defer close(c.done)
	var tick <-chan time.Time
	if c.interval > 0 {
		t := time.NewTicker(c.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-c.stop:
			return
		case <-c.wake:
		case <-tick:
		}
		for {
			if err := c.fill(ctx); err != nil {
				c.padErr.Store(&err)
			} else {
				c.padErr.Store(nil)
			}
			c.wanted.Store(false)
			c.notify()
			// Takes while wanted was still set asked for nothing: look
			// again now that they can ask.
			if c.padErr.Load() != nil || c.tail.Load()-c.head.Load() > c.threshold {
				break
			}
			if !c.wanted.CompareAndSwap(false, true) {
				break // a take asked meanwhile; its wake is pending
			}
		}
	}
}

// fill pads the buffer's free slots. Only NewCached, before the padder
// starts, and the padder call it.
func (c *Cached) fill(ctx context.Context) error {
	c.pads.Add(1)
	for {
		h := c.head.Load()
		if h&closedBit != 0 {
			return ErrClosed
		}
		t := c.tail.Load()
		free := h + c.size - t
		if free <= 0 {
			return nil
		}
		last, n, err := c.g.issue(ctx, min(free, padChunk))
		if err != nil {
			return err
		}
		// The run is consecutive in the sequence field, as in Fill.
		id := last - (n-1)*c.seqOne
		for i := range n {
			c.slots[(t+i)&c.mask].Store(id)
			id += c.seqOne
		}
		c.newest.Store(last)
		c.tail.Store(t + n)
		c.padErr.Store(nil)
		c.notify()
	}
}

// notify wakes the callers waiting for IDs, if any.
func (c *Cached) notify() {
	if c.waiters.Load() == 0 {
		return
	}
	ch := make(chan struct{})
	close(*c.ready.Swap(&ch))
}

// Stats reports the buffer's state. The figures are read one by one while
// the buffer changes, so they agree only roughly.
func (c *Cached) Stats() CachedStats {
	h := c.head.Load() &^ closedBit
	t := c.tail.Load()
	return CachedStats{
		Size:     int(c.size),
		Buffered: int(max(t-h, 0)),
		Taken:    h,
		Padded:   t,
		Pads:     c.pads.Load(),
		Empty:    c.empties.Load(),
		Newest:   ID(c.newest.Load()),
		Ahead:    c.g.Ahead(),
	}
}

// Close stops the padder and waits for it, then closes the generator, which
// saves its high-water mark (or releases its lease) past every ID padded.
// The IDs still buffered are lost. Next then fails with [ErrClosed]; calls
// waiting on an empty buffer return with it. It is safe to call more than
// once and returns the generator's Close error.
func (c *Cached) Close() error {
	c.closeOnce.Do(func() {
		for {
			h := c.head.Load()
			// Failing every compare-and-swap in flight, so no take
			// succeeds after this.
			if c.head.CompareAndSwap(h, h|closedBit) {
				break
			}
		}
		close(c.stop)
		c.cancel()
		<-c.done
		c.closeErr = c.g.Close()
	})
	return c.closeErr
}
