package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemq/idemq/idgen"
)

// Config holds an Allocator's optional settings. The zero value gives
// Meituan Leaf's behaviour: the next segment loads once a tenth of the current
// one is used, and the step doubles while a segment lasts under 15 minutes,
// up to a million, and halves when one lasts 30 minutes or more.
type Config struct {
	// PreloadAt is the share of the current segment used after which the
	// next one is loaded in the background, in (0, 1]. Default 0.1: Leaf
	// loads when less than 90% is left. At 1 the load starts with the
	// segment's last ID, and the Next after it usually waits for the store.
	PreloadAt float64
	// MaxStep bounds the step as it doubles. Default 1,000,000 (Leaf's
	// MAX_STEP). A tag whose stored step is larger is loaded at its stored
	// step.
	MaxStep int64
	// FastSegment: when a segment lasted less than this, the next load
	// asks for twice the step. Default 15 minutes (Leaf's
	// SEGMENT_DURATION).
	FastSegment time.Duration
	// SlowSegment: when a segment lasted this long or longer, the next
	// load asks for half the step, never less than the tag's stored step.
	// Between FastSegment and SlowSegment the step stays. Default 30
	// minutes, or FastSegment if that is longer; it must not be less than
	// FastSegment.
	SlowSegment time.Duration
	// LoadTimeout bounds each load, the first (which New's context bounds
	// too) and those in the background. Default 5s.
	LoadTimeout time.Duration
	// Clock times segments for the adaptive step and stamps load failures;
	// nil means the system clock.
	Clock idgen.Clock
	// Logger reports loads that fail (at warn) and the first success after
	// them. Default slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	defaultPreloadAt   = 0.1
	defaultMaxStep     = 1_000_000
	defaultFastSegment = 15 * time.Minute
	defaultSlowSegment = 30 * time.Minute
	defaultLoadTimeout = 5 * time.Second
)

// A failed load is retried after a pause that doubles from minRetry to
// maxRetry.
const (
	minRetry = 20 * time.Millisecond
	maxRetry = time.Second
)

func (c *Config) setDefaults() {
	if c.PreloadAt == 0 {
		c.PreloadAt = defaultPreloadAt
	}
	if c.MaxStep == 0 {
		c.MaxStep = defaultMaxStep
	}
	if c.FastSegment == 0 {
		c.FastSegment = defaultFastSegment
	}
	if c.SlowSegment == 0 {
		c.SlowSegment = max(defaultSlowSegment, c.FastSegment)
	}
	if c.LoadTimeout == 0 {
		c.LoadTimeout = defaultLoadTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a config New rejects, wrapping [idgen.ErrInvalidConfig]. Zero
// fields stand for their defaults.
func (c Config) Validate() error {
	c.setDefaults()
	switch {
	case !(c.PreloadAt > 0 && c.PreloadAt <= 1):
		return fmt.Errorf("segment: Config.PreloadAt %v outside (0, 1]: %w", c.PreloadAt, idgen.ErrInvalidConfig)
	case c.MaxStep < 0:
		return fmt.Errorf("segment: negative Config.MaxStep %d: %w", c.MaxStep, idgen.ErrInvalidConfig)
	case c.FastSegment < 0 || c.SlowSegment < c.FastSegment:
		return fmt.Errorf("segment: Config.FastSegment %v and SlowSegment %v must be positive and in that order: %w", c.FastSegment, c.SlowSegment, idgen.ErrInvalidConfig)
	case c.LoadTimeout < 0:
		return fmt.Errorf("segment: negative Config.LoadTimeout %v: %w", c.LoadTimeout, idgen.ErrInvalidConfig)
	}
	return nil
}

// An Allocator issues the IDs of one tag of a [Store] in segments, as
// Meituan Leaf's segment mode does: it reserves a range of the tag's counter
// with one store call and hands its IDs out from memory, one atomic addition
// each. It is safe for concurrent use.
//
// Once Config.PreloadAt of the current segment is used, a background
// goroutine loads the next (Leaf's double buffer), so that Next switches
// segments without a store call; a Next that finds both used up waits for
// the load under way. A failed load is retried with backoff while IDs keep
// flowing from the current segment; Next fails, wrapping the source's error,
// only when both segments are used up, and resumes once a retry succeeds.
// At a tag's maximum Next fails with [ErrMaxReached]; it never wraps around.
//
// One allocator's IDs increase; allocators of one tag on several hosts each
// hold their own segments, so across them IDs are only roughly ordered. The
// IDs left in both segments are lost at Close or a crash: segment IDs have
// gaps, never duplicates.
type Allocator struct {
	// cur is the segment IDs are taken from; the only field the hot path
	// reads.
	cur atomic.Pointer[segBuf]
	_   [56]byte

	src  Store
	tag  string
	cfg  Config
	now  func() int64
	ctx  context.Context // background loads; cancelled by Close
	stop context.CancelFunc
	kick chan struct{} // starts a background load; see begin
	done chan struct{} // closed when the loader goroutine ends
	once sync.Once

	mu      sync.Mutex // guards the fields below and the switch of cur
	next    *segBuf    // the segment loaded ahead, nil if none
	loading bool       // a load is under way
	loaded  chan struct{}
	closed  bool
	// The adaptive step: the step asked for last (the stored step after
	// the first load), the tag's stored step from its latest segment, and
	// when the latest load started.
	step, floor, lastLoad int64
	end                   int64 // End of the latest segment
	segments              int64
	failing               error // the latest load's error; nil after a success
	failures              int64
	waits                 int64
	lastErr               error
	lastErrAt             int64
}

// segBuf is a segment being issued. Its 48 bytes fit one cache line.
type segBuf struct {
	// used counts the IDs taken; it overshoots size once the segment is
	// used up, as every caller that finds it so adds once more.
	used  atomic.Int64
	start int64
	size  int64
	// mark is the value of used whose taker starts the next load.
	mark      int64
	step, max int64 // of the Segment, for Stats
}

func newSegBuf(s Segment, preloadAt float64) *segBuf {
	n := s.End - s.Start
	// Leaf loads when less than (1-preloadAt) of the segment is left, that
	// is once more than preloadAt of it is used.
	mark := min(int64(float64(n)*preloadAt)+1, n)
	return &segBuf{start: s.Start, size: n, mark: mark, step: s.Step, max: s.Max}
}

func (s *segBuf) segment() Segment {
	if s.size == 0 {
		return Segment{}
	}
	return Segment{Start: s.start, End: s.start + s.size, Step: s.step, Max: s.max}
}

// New returns an allocator of tag's IDs from src. It loads the first
// segment before it returns, bounded by ctx and Config.LoadTimeout, so that
// an unknown tag ([ErrUnknownTag]), a tag at its maximum ([ErrMaxReached]) or an
// unreachable source fails here. Close stops its background loads. Errors
// also wrap [idgen.ErrInvalidConfig] or [ErrBadSegment].
func New(ctx context.Context, src Store, tag string, cfg Config) (*Allocator, error) {
	switch {
	case src == nil:
		return nil, fmt.Errorf("segment: New without a Store: %w", idgen.ErrInvalidConfig)
	case tag == "":
		return nil, fmt.Errorf("segment: New with an empty tag: %w", idgen.ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	a := &Allocator{src: src, tag: tag, cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{})}
	a.now = func() int64 { return time.Now().UnixNano() }
	if cfg.Clock != nil {
		a.now = cfg.Clock.UnixNano
	}
	now := a.now()
	first, cancel := context.WithTimeout(ctx, cfg.LoadTimeout)
	seg, err := src.NextSegment(first, tag, 0)
	cancel()
	if err == nil {
		err = a.check(seg, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("segment: first segment of tag %q: %w", tag, err)
	}
	a.accept(seg, 0, now)
	a.cur.Store(newSegBuf(seg, cfg.PreloadAt))
	a.ctx, a.stop = context.WithCancel(context.Background())
	go a.run()
	return a, nil
}

// Next issues an ID. The context matters only when Next has to wait for a
// segment being loaded. Errors wrap [idgen.ErrClosed], [ErrMaxReached], the
// source's error when no ID is left and the next segment failed to load, or
// the context's while waiting.
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	for {
		s := a.cur.Load()
		n := s.used.Add(1)
		if n <= s.size {
			if n == s.mark {
				a.preload()
			}
			return s.start + n - 1, nil
		}
		if err := a.advance(ctx, s); err != nil {
			return 0, err
		}
	}
}

// Fill fills ids with new IDs in increasing order, taking each run within a
// segment with one atomic addition. It returns how many it filled, all of
// ids unless an error (as from Next) stops it.
func (a *Allocator) Fill(ctx context.Context, ids []int64) (int, error) {
	filled := 0
	for filled < len(ids) {
		s := a.cur.Load()
		k := int64(len(ids) - filled)
		n := s.used.Add(k)
		from := n - k
		if from >= s.size {
			if err := a.advance(ctx, s); err != nil {
				return filled, err
			}
			continue
		}
		if from < s.mark && s.mark <= n {
			a.preload()
		}
		for v, end := s.start+from, s.start+min(n, s.size); v < end; v++ {
			ids[filled] = v
			filled++
		}
	}
	return filled, nil
}

// preload starts loading the next segment, unless one is loaded or under
// way, or a retry after a failure is due.
func (a *Allocator) preload() {
	a.mu.Lock()
	kicked := a.begin(false)
	if kicked {
		a.kick <- struct{}{}
	}
	a.mu.Unlock()
	if kicked {
		// The loader is next to run on this P. Callers that never block
		// would leave it no P until the runtime preempts one (after
		// 10ms), past the end of a short segment, and another P's thread
		// may be waiting for the machine's CPU: yield it this one now.
		// The loader runs until its source call blocks, or, for an
		// in-memory source, returns.
		runtime.Gosched()
	}
}

// begin marks a load as under way if one is wanted; retry says a failure's
// retry is due. Called with mu held. A successful begin is followed by one
// load, so at most one kick is ever pending and sending it never blocks.
func (a *Allocator) begin(retry bool) bool {
	if a.closed || a.loading || a.next != nil || (a.failing != nil && !retry) {
		return false
	}
	a.loading = true
	a.loaded = make(chan struct{})
	return true
}

// advance moves on from s, which is used up: to the next segment, waiting
// for its load if it is under way.
func (a *Allocator) advance(ctx context.Context, s *segBuf) error {
	a.mu.Lock()
	for waited := false; ; waited = true {
		switch {
		case a.closed:
			a.mu.Unlock()
			return a.closedErr()
		case a.cur.Load() != s: // another caller switched
			a.mu.Unlock()
			return nil
		case a.next != nil:
			a.cur.Store(a.next)
			a.next = nil
			a.mu.Unlock()
			return nil
		case !a.loading && a.failing != nil:
			err := a.emptyErr()
			a.mu.Unlock()
			return err
		case a.begin(false):
			a.kick <- struct{}{}
		}
		if !waited {
			a.waits++
		}
		wait := a.loaded
		a.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("segment: tag %q: waiting for the next segment: %w", a.tag, ctx.Err())
		case <-a.ctx.Done():
			return a.closedErr()
		}
		a.mu.Lock()
	}
}

func (a *Allocator) closedErr() error {
	return fmt.Errorf("segment: tag %q: allocator closed: %w", a.tag, idgen.ErrClosed)
}

// emptyErr is Next's error when both segments are used up and the latest
// load failed. Called with mu held.
func (a *Allocator) emptyErr() error {
	if errors.Is(a.failing, ErrMaxReached) {
		return fmt.Errorf("segment: tag %q: every ID below its maximum issued; raise the tag's maximum or move to a new tag: %w", a.tag, a.failing)
	}
	return fmt.Errorf("segment: tag %q: no IDs left and the next segment failed to load (%d failures); check the source: IDs resume once a retry succeeds: %w", a.tag, a.failures, a.failing)
}

// run is the loader goroutine: it loads when kicked, and retries a failed
// load with backoff until one succeeds, until Close.
func (a *Allocator) run() {
	defer close(a.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var delay time.Duration
	lt := loadTimer{parent: a.ctx, d: a.cfg.LoadTimeout}
	defer lt.stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.kick:
		case <-retry.C:
			a.mu.Lock()
			ok := a.begin(true)
			a.mu.Unlock()
			if !ok {
				continue
			}
		}
		if a.load(&lt) {
			delay = 0
		} else {
			delay = min(max(2*delay, minRetry), maxRetry)
			retry.Reset(delay)
		}
	}
}

// load reserves the next segment; begin has marked it under way. It reports
// whether it succeeded.
func (a *Allocator) load(lt *loadTimer) bool {
	a.mu.Lock()
	now := a.now()
	step := a.nextStep(now)
	a.mu.Unlock()
	ctx := lt.start()
	seg, err := a.src.NextSegment(ctx, a.tag, step)
	lt.stop()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loading = false
	close(a.loaded)
	if err == nil {
		err = a.check(seg, step)
	}
	if err != nil {
		if a.closed {
			// Close cancelled the load: nothing failed that anyone
			// should hear of.
			return false
		}
		err = fmt.Errorf("segment: load a segment of tag %q (step %d): %w", a.tag, step, err)
		if a.failing == nil {
			a.cfg.Logger.Warn("segment: loading the next segment failed; retrying", "tag", a.tag, "err", err, "idsLeft", a.left())
		}
		a.failing, a.lastErr, a.lastErrAt = err, err, a.now()
		a.failures++
		return false
	}
	if a.failing != nil {
		a.cfg.Logger.Info("segment: next segment loaded again", "tag", a.tag, "segment", fmt.Sprintf("[%d, %d)", seg.Start, seg.End))
		a.failing = nil
	}
	a.accept(seg, step, now)
	if !a.closed {
		a.next = newSegBuf(seg, a.cfg.PreloadAt)
	}
	return true
}

// loadTimer bounds each load by the load timeout without a context and a
// timer made per load (0.35 µs of the call that starts a preload, which
// runs the loader): the loads share one context, renewed only after a
// load timed out, and one timer re-armed per load.
type loadTimer struct {
	parent context.Context
	d      time.Duration
	ctx    context.Context
	timer  *time.Timer
}

// start returns the context of the next load, its timeout armed.
func (l *loadTimer) start() context.Context {
	if l.ctx == nil || l.ctx.Err() != nil {
		ctx, cancel := context.WithCancelCause(l.parent)
		timeout := fmt.Errorf("segment: load timed out after %v (Config.LoadTimeout): %w", l.d, context.DeadlineExceeded)
		l.ctx, l.timer = ctx, time.AfterFunc(l.d, func() { cancel(timeout) })
		return l.ctx
	}
	l.timer.Reset(l.d)
	return l.ctx
}

// stop disarms the timeout of the load that ended.
func (l *loadTimer) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// nextStep is the step the next load asks for, by Leaf's rule: the stored
// step (0) for the first, the first segment's for the second, then by how
// long the previous segment lasted: under FastSegment twice the previous
// (up to MaxStep), from SlowSegment on half (never below the stored step),
// else the same. A busy allocator thus calls the store about once per
// FastSegment to SlowSegment, and a quiet one holds no more than the stored
// step in reserve. Called with mu held.
func (a *Allocator) nextStep(now int64) int64 {
	switch a.segments {
	case 0:
		return 0
	case 1:
		return a.step
	}
	s := a.step
	switch lasted := time.Duration(now - a.lastLoad); {
	case lasted < a.cfg.FastSegment:
		if limit := max(a.cfg.MaxStep, a.floor); s <= limit/2 {
			s *= 2
		} else {
			s = limit
		}
	case lasted >= a.cfg.SlowSegment:
		s /= 2
	}
	return max(s, a.floor)
}

// check refuses a segment no source should return. Called with mu held or
// before the allocator is shared.
func (a *Allocator) check(seg Segment, step int64) error {
	switch {
	case seg.Start < 0 || seg.End <= seg.Start:
		return fmt.Errorf("segment: [%d, %d) is empty or negative: %w", seg.Start, seg.End, ErrBadSegment)
	case step > 0 && seg.End-seg.Start > step:
		return fmt.Errorf("segment: [%d, %d) is longer than the step %d asked for: %w", seg.Start, seg.End, step, ErrBadSegment)
	case seg.Start < a.end:
		return fmt.Errorf("segment: [%d, %d) starts below the end %d of the previous one: the tag's counter went back; set it past the highest ID issued: %w", seg.Start, seg.End, a.end, ErrBadSegment)
	}
	return nil
}

// accept records a segment loaded with step at now. Called with mu held or
// before the allocator is shared.
func (a *Allocator) accept(seg Segment, step, now int64) {
	a.segments++
	a.lastLoad = now
	a.floor = max(seg.Step, 1)
	a.step = step
	if step == 0 {
		a.step = a.floor
	}
	a.end = seg.End
}

// left is the number of IDs left in the current and the next segment.
// Called with mu held.
func (a *Allocator) left() int64 {
	s := a.cur.Load()
	n := max(s.size-s.used.Load(), 0)
	if a.next != nil {
		n += a.next.size
	}
	return n
}

// Stats describes an Allocator's state.
type Stats struct {
	// Current is the segment IDs are taken from, Next the one loaded
	// ahead; zero when there is none (Current after Close).
	Current, Next Segment
	// Left is the number of IDs left in both.
	Left int64
	// Step is the step of the latest load: the tag's stored step for the
	// first two, then as the adaptive rule set it.
	Step int64
	// Segments is the number of segments loaded, the first included.
	Segments int64
	// Loading reports a load under way.
	Loading bool
	// Waits counts the calls that found both segments used up and waited
	// for a load: many mean the source answers too slowly for the step,
	// so raise the tag's stored step or lower PreloadAt.
	Waits int64
	// LoadFailures counts the loads that failed; Failing reports that the
	// latest did, so that a retry is due.
	LoadFailures int64
	Failing      bool
	// LastError is the latest load failure and LastErrorAt its time by
	// the allocator's clock; they stay after a load succeeds.
	LastError   error
	LastErrorAt time.Time
}

// Stats returns the allocator's state.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Stats{
		Current:      a.cur.Load().segment(),
		Left:         a.left(),
		Step:         a.step,
		Segments:     a.segments,
		Loading:      a.loading,
		Waits:        a.waits,
		LoadFailures: a.failures,
		Failing:      a.failing != nil,
		LastError:    a.lastErr,
	}
	if a.next != nil {
		st.Next = a.next.segment()
	}
	if a.lastErr != nil {
		st.LastErrorAt = time.Unix(0, a.lastErrAt)
	}
	return st
}

// Close stops the background loads and waits for the loader goroutine to
// end. The IDs left in the current and the next segment are lost. Next and
// Fill then fail with [idgen.ErrClosed]. It is safe to call more than once.
func (a *Allocator) Close() error {
	a.once.Do(func() {
		a.mu.Lock()
		a.closed = true
		a.next = nil
		a.cur.Store(&segBuf{}) // sends every caller to advance
		a.mu.Unlock()
		a.stop()
	})
	<-a.done
	return nil
}
