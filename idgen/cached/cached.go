package cached

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/idgen"
)

// ErrBufferEmpty is what a [Generator] configured with
// [Config].FailWhenEmpty returns when Next finds no ID buffered: its padding
// has not caught up with the callers (or the generator behind it cannot
// issue IDs; the error then wraps the generator's too). Retry later, enlarge
// the buffer, or let Next wait.
var ErrBufferEmpty = errors.New("cached: ID buffer empty")

// Config holds a [Generator]'s optional settings. The zero value gives
// uid-generator's defaults: a buffer of eight ticks' worth of IDs, padded
// when fewer than half remain, no scheduled padding, and Next waiting when
// the buffer is empty.
type Config struct {
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
	// FailWhenEmpty makes Next fail at once with [ErrBufferEmpty] when no
	// ID is buffered, where by default it waits for the padding for as
	// long as its context allows: uid-generator's
	// RejectedTakeBufferHandler.
	FailWhenEmpty bool
}

// Defaults of Config: the default Size is the layout's IDs per tick shifted
// left by boostPower.
const (
	boostPower            = 3
	defaultPaddingPercent = 50
)

// maxSize bounds Config.Size: 8 GiB of slots.
const maxSize = 1 << 30

// padChunk is the most IDs the padder writes before it publishes them, so
// that a caller waiting on an empty buffer is served after a few
// microseconds rather than after a whole buffer.
const padChunk = 512

// closedBit, set in head by Close, makes every take miss: a head beyond any
// tail sends callers to the slow path, which reports idgen.ErrClosed, so
// that the hot path needs no closed flag of its own.
const closedBit = 1 << 62

// emptySpins is how many times a caller finding the buffer empty yields
// before it parks: a padder in the middle of a chunk publishes within
// microseconds, and parking costs about as much.
const emptySpins = 16

// A Generator hands out IDs from a ring buffer that a background padder
// fills ahead of time from an [idgen.Generator]: Baidu uid-generator's
// CachedUidGenerator. It is safe for concurrent use.
//
// The padder writes only free slots and is the only writer, so the buffer
// never overflows: uid-generator's RejectedPutBufferHandler, which handles a
// put into a full ring (its threshold-triggered and scheduled paddings race
// there), has no counterpart. Its RejectedTakeBufferHandler is
// Config.FailWhenEmpty.
type Generator struct {
	g         *idgen.Generator
	mask      int64
	size      int64
	threshold int64 // pad when a take leaves at most this many buffered
	failEmpty bool
	slots     []atomic.Int64
	layout    idgen.Layout
	perTick   int64      // IDs of one tick
	chunk     []idgen.ID // the padder's buffer for one run of IDs
	tickLeft  int64      // IDs left in the tick of the last ID padded; the padder's alone

	_ [64]byte // keeps the read-mostly fields above off head's cache line
	// The ring has size slots and two positions: head, the next to take,
	// and tail, one past the last ID padded. A take reads the slot at head
	// and moves head on with a compare-and-swap; the padder writes only
	// slots between tail and head plus size, so a successful
	// compare-and-swap proves the slot read was not overwritten. The two
	// sit on separate cache lines (uid-generator's PaddedAtomicLong).
	//
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

// Stats reports a Generator's state; see [Generator.Stats].
type Stats struct {
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
	Newest idgen.ID
	// Ahead is how far Newest's time runs ahead of the clock: at most
	// the generator's Borrow.MaxAhead.
	Ahead time.Duration
}

// New returns a Generator drawing IDs from g, which it owns from then on:
// its Close closes g. g's rollback policy must be [idgen.Borrow] with a
// MaxAhead of at least the time one buffer of IDs spans (Size over the
// layout's IDs per tick, in ticks): padding a buffer takes the next ticks
// early instead of waiting for each. New pads the buffer once before it
// returns, within ctx, so that a generator that cannot issue IDs (a store
// held by another process, a clock behind the mark) fails here. On error g
// is left open, the caller's to close. Errors wrap [idgen.ErrInvalidConfig]
// or those of [idgen.Generator.Next].
func New(ctx context.Context, g *idgen.Generator, cfg Config) (*Generator, error) {
	if g == nil {
		return nil, fmt.Errorf("cached: New without an idgen.Generator: %w", idgen.ErrInvalidConfig)
	}
	gc := g.Config()
	perTick := int64(1) << gc.Layout.SequenceBits
	size := int64(cfg.Size)
	if size == 0 {
		size = min(perTick<<boostPower, maxSize)
	}
	pct := cfg.PaddingPercent
	if pct == 0 {
		pct = defaultPaddingPercent
	}
	unit := gc.Layout.Unit
	span := time.Duration((size+perTick-1)/perTick) * unit // the time one buffer spans
	borrow, isBorrow := gc.Rollback.(idgen.Borrow)
	switch {
	case size < 2 || size > maxSize || bits.OnesCount64(uint64(size)) != 1:
		return nil, fmt.Errorf("cached: Config.Size %d is not a power of two from 2 to 2^30: %w", cfg.Size, idgen.ErrInvalidConfig)
	case pct < 0 || pct > 100:
		return nil, fmt.Errorf("cached: Config.PaddingPercent %d is outside 1 to 100: %w", cfg.PaddingPercent, idgen.ErrInvalidConfig)
	case cfg.PaddingInterval < 0:
		return nil, fmt.Errorf("cached: negative Config.PaddingInterval %v: %w", cfg.PaddingInterval, idgen.ErrInvalidConfig)
	case !isBorrow:
		return nil, fmt.Errorf("cached: the generator's rollback policy is %T, not Borrow, so padding would wait for the clock at every tick; make it with Config.Rollback: idgen.Borrow{MaxAhead: %v} or more: %w",
			gc.Rollback, span, idgen.ErrInvalidConfig)
	case borrow.MaxAhead/unit*unit < span:
		return nil, fmt.Errorf("cached: Borrow.MaxAhead %v is shorter than the %v one buffer of %d IDs spans at %d IDs per %v; raise MaxAhead or lower Config.Size: %w",
			borrow.MaxAhead, span, size, perTick, unit, idgen.ErrInvalidConfig)
	}
	c := &Generator{
		g:         g,
		mask:      size - 1,
		size:      size,
		threshold: max(size*int64(pct)/100, 1),
		failEmpty: cfg.FailWhenEmpty,
		slots:     make([]atomic.Int64, size),
		layout:    gc.Layout,
		perTick:   perTick,
		tickLeft:  1, // until the first ID tells
		chunk:     make([]idgen.ID, min(padChunk, size)),
		wake:      make(chan struct{}, 1),
		interval:  cfg.PaddingInterval,
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	ready := make(chan struct{})
	c.ready.Store(&ready)
	if err := c.fill(ctx); err != nil {
		return nil, fmt.Errorf("cached: first padding: %w", err)
	}
	padCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(padCtx)
	return c, nil
}

// Next takes the next buffered ID. While the buffer holds IDs it is a few
// atomic operations and allocates nothing; the context matters only when
// the buffer is empty and Config.FailWhenEmpty is not set. Errors wrap
// [ErrBufferEmpty] (with FailWhenEmpty), [idgen.ErrClosed], a context's
// error, or the generator's error that stopped the padding.
func (c *Generator) Next(ctx context.Context) (idgen.ID, error) {
	if id, ok := c.take(); ok {
		return id, nil
	}
	return c.next(ctx)
}

// take takes the ID at head unless the buffer is empty (or closed: the
// closed bit puts head past every tail).
func (c *Generator) take() (idgen.ID, bool) {
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
			return idgen.ID(id), true
		}
	}
}

// askPadding wakes the padder unless a padding was asked for already.
func (c *Generator) askPadding() {
	if c.wanted.CompareAndSwap(false, true) {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// next is Next on an empty buffer, or a closed generator.
func (c *Generator) next(ctx context.Context) (idgen.ID, error) {
	if c.head.Load()&closedBit != 0 {
		return 0, fmt.Errorf("cached: %w", idgen.ErrClosed)
	}
	c.empties.Add(1)
	c.askPadding()
	if c.failEmpty {
		if id, ok := c.take(); ok {
			return id, nil
		}
		if p := c.padErr.Load(); p != nil {
			return 0, fmt.Errorf("cached: %w: padding failed: %w", ErrBufferEmpty, *p)
		}
		return 0, fmt.Errorf("cached: %w: padding has not caught up with the callers", ErrBufferEmpty)
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
			return 0, fmt.Errorf("cached: %w", idgen.ErrClosed)
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
				return 0, fmt.Errorf("cached: pad the buffer: %w", *p)
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("cached: waiting for padding: %w", ctx.Err())
		case <-c.stop:
			return 0, fmt.Errorf("cached: %w", idgen.ErrClosed)
		}
	}
}

// run is the padder: it pads when asked to and on schedule until Close.
func (c *Generator) run(ctx context.Context) {
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

// fill pads the buffer's free slots. Only New, before the padder starts,
// and the padder call it.
func (c *Generator) fill(ctx context.Context) error {
	c.pads.Add(1)
	for {
		h := c.head.Load()
		if h&closedBit != 0 {
			return idgen.ErrClosed
		}
		t := c.tail.Load()
		free := h + c.size - t
		if free <= 0 {
			return nil
		}
		// A run no longer than what is left of the last ID's tick is one
		// compare-and-swap of the generator, so that a padder borrowing up
		// to its limit publishes what it has before it waits for the
		// clock.
		want := min(free, int64(len(c.chunk)), c.tickLeft)
		ids := c.chunk[:want]
		n, err := c.g.Fill(ctx, ids)
		for i, id := range ids[:n] {
			c.slots[(t+int64(i))&c.mask].Store(int64(id))
		}
		if n > 0 {
			last := ids[n-1]
			c.newest.Store(int64(last))
			c.tail.Store(t + int64(n))
			if c.tickLeft = c.perTick - 1 - c.layout.Decode(last).Sequence; c.tickLeft == 0 {
				c.tickLeft = c.perTick
			}
		}
		if err != nil {
			return err
		}
		c.padErr.Store(nil)
		c.notify()
	}
}

// notify wakes the callers waiting for IDs, if any.
func (c *Generator) notify() {
	if c.waiters.Load() == 0 {
		return
	}
	ch := make(chan struct{})
	close(*c.ready.Swap(&ch))
}

// Stats reports the buffer's state. The figures are read one by one while
// the buffer changes, so they agree only roughly.
func (c *Generator) Stats() Stats {
	h := c.head.Load() &^ closedBit
	t := c.tail.Load()
	return Stats{
		Size:     int(c.size),
		Buffered: int(max(t-h, 0)),
		Taken:    h,
		Padded:   t,
		Pads:     c.pads.Load(),
		Empty:    c.empties.Load(),
		Newest:   idgen.ID(c.newest.Load()),
		Ahead:    c.g.Ahead(),
	}
}

// Close stops the padder and waits for it, then closes the generator, which
// saves its high-water mark (or releases its lease) past every ID padded.
// The IDs still buffered are lost. Next then fails with [idgen.ErrClosed]; calls
// waiting on an empty buffer return with it. It is safe to call more than
// once and returns the generator's Close error.
func (c *Generator) Close() error {
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
