package idgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LeaseConfig configures how a generator made by [NewLeased] holds its node
// id. The zero value takes any free node, fails at once when there is none,
// and keeps a safety margin of a fifth of the lease.
type LeaseConfig struct {
	// Static leases Node itself instead of any free node: a node set by
	// configuration is registered, so that a second process configured
	// with the same node fails at start with ErrNoFreeNode.
	Static bool
	// Node is, with Static, the node to register, 0 to Layout.MaxNode();
	// without Static it must be 0.
	Node int64
	// Wait makes NewLeased wait, for as long as its context allows, for a
	// node to come free or the pool to finish recovering, instead of
	// failing with ErrNoFreeNode.
	Wait bool
	// Margin is how long before its lease would end, by the local
	// monotonic clock, a generator that could not renew stops issuing IDs.
	// It covers the drift between the local clock and the store's over a
	// lease and the time a stalled process takes to notice. Default a
	// fifth of the lease; it must be less than half the lease.
	Margin time.Duration
	// Owner describes the holder to operators listing the pool. Default
	// "<host name>:<process id>".
	Owner string
	// Logger reports renewals that fail, leases lost and taken again.
	// Default slog.Default().
	Logger *slog.Logger
}

// minRetry and maxRetry bound how often a failing renewal or a waiting
// acquire is tried again.
const (
	minRetry = 20 * time.Millisecond
	maxRetry = time.Second
)

// NewLeased returns a generator whose node id is leased from l for as long
// as it runs: it takes a node (lc.Node itself with lc.Static), starts after
// the node's high-water mark, renews the lease in the background and
// releases it on Close. Each renewal raises the node's mark to the end of
// the window in which the generator may issue IDs before its next renewal,
// so that the next holder starts after every ID this one issued even if it
// was killed, and even if its clock runs behind this one's. A generator that
// cannot prove its lease live (its last successful renewal plus the lease,
// less lc.Margin, lies behind the local monotonic clock) fails Next with
// [ErrLeaseLost] until a renewal succeeds or, if the lease was lost, it
// has leased a node again. Renewals run off the hot path.
//
// ctx bounds the first lease (and the wait for one with lc.Wait). cfg.Store
// must be nil: the lease carries the high-water mark. Under [Borrow], the
// lease less its margin must exceed MaxAhead by two ticks, so that IDs
// borrowed that far stay inside the window a renewal opens. Errors wrap
// those of [New], [ErrNoFreeNode], [ErrInvalidConfig] or
// the leaser's.
func NewLeased(ctx context.Context, l Leaser, cfg Config, lc LeaseConfig) (*Generator, error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: NewLeased without a Leaser", ErrInvalidConfig)
	case cfg.Store != nil:
		return nil, fmt.Errorf("%w: a leased generator keeps its high-water mark in the lease; leave Config.Store nil", ErrInvalidConfig)
	case lc.Node != 0 && !lc.Static:
		return nil, fmt.Errorf("%w: LeaseConfig.Node %d without LeaseConfig.Static: set Static to register that node, or leave Node 0 to lease any free node", ErrInvalidConfig, lc.Node)
	case lc.Margin < 0:
		return nil, fmt.Errorf("%w: negative LeaseConfig.Margin %v", ErrInvalidConfig, lc.Margin)
	}
	if lc.Owner == "" {
		host, _ := os.Hostname()
		lc.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if lc.Logger == nil {
		lc.Logger = slog.Default()
	}
	g, err := newGenerator(lc.Node, cfg, true)
	if err != nil {
		return nil, err
	}
	h := &leaseHolder{
		leaser: l,
		req:    LeaseRequest{MaxNode: g.layout.MaxNode(), Static: lc.Static, Node: lc.Node, Owner: lc.Owner},
		cfg:    lc,
		start:  time.Now(),
		turn:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	g.lease = h
	// A generator that never starts stops its coarse clock.
	fail := func(err error) (*Generator, error) {
		if g.coarse != nil {
			g.coarse.close()
		}
		return nil, err
	}
	if err := h.lock(ctx); err != nil {
		return fail(err)
	}
	for {
		err = h.moveLocked(ctx, g, h.req, Lease{})
		// A waiting caller also waits out a lease lost before its first
		// renewal (the process stalled for a lease): it issued nothing.
		if err == nil || !lc.Wait || !errors.Is(err, ErrNoFreeNode) && !errors.Is(err, ErrLeaseLost) {
			break
		}
		if werr := park(ctx, 10*minRetry); werr != nil {
			err = fmt.Errorf("%w (waiting: %w)", err, werr)
			break
		}
	}
	h.unlock()
	if err != nil {
		return fail(err)
	}
	if h.ttl(g) == 0 {
		close(h.done)
	} else {
		go h.run(g)
	}
	return g, nil
}

// maxFence is the fence of a lease that never ends.
const maxFence = int64(1<<63 - 1)

// leaseHolder keeps a generator's lease.
type leaseHolder struct {
	leaser Leaser
	req    LeaseRequest
	cfg    LeaseConfig
	start  time.Time // the origin of the monotonic readings below

	// fence is when, in monotonic nanoseconds since start, the lease can
	// no longer be proven live.
	fence atomic.Int64
	// lastErr is the latest failure to renew or lease, for errors.
	lastErr atomic.Pointer[error]

	// turn, held through lock and unlock, is taken to call the leaser and
	// to change cur: one call at a time, so that a renewal, a release and
	// a move to another node never cross, and a move is decided and made
	// by one caller. Waiting for it honours a context.
	turn chan struct{}
	cur  Lease // guarded by the generator's mu; changed only with the turn

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func (h *leaseHolder) lock(ctx context.Context) error {
	select {
	case h.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *leaseHolder) unlock() { <-h.turn }

func (h *leaseHolder) mono() int64 { return int64(time.Since(h.start)) }

// window is how long after a renewal's request was sent the holder may
// issue IDs.
func (h *leaseHolder) window(ttl time.Duration) time.Duration {
	m := h.cfg.Margin
	if m == 0 {
		m = ttl / 5
	}
	return ttl - m
}

// acquire leases a node with req and checks the lease against the
// generator; it gives back a lease that fails the checks.
func (h *leaseHolder) acquire(ctx context.Context, g *Generator, req LeaseRequest) (Lease, error) {
	lease, err := h.leaser.Acquire(ctx, req)
	switch {
	case errors.Is(err, ErrNoFreeNode) || errors.Is(err, ErrInvalidConfig):
		// The leaser's answer names this package's sentinel, and so the
		// package, already.
		return Lease{}, err
	case err != nil:
		return Lease{}, fmt.Errorf("idgen: lease a node id: %w", err)
	}
	err = lease.validate(g.layout)
	if err == nil && req.Static && lease.Node != req.Node {
		err = fmt.Errorf("%w: leaser granted node %d for static node %d", ErrInvalidConfig, lease.Node, req.Node)
	}
	if err == nil && lease.TTL > 0 && h.cfg.Margin >= lease.TTL/2 {
		err = fmt.Errorf("%w: LeaseConfig.Margin %v is not less than half the lease %v", ErrInvalidConfig, h.cfg.Margin, lease.TTL)
	}
	if err == nil && lease.TTL > 0 && h.window(lease.TTL) < 2*g.layout.Unit {
		err = fmt.Errorf("%w: a lease of %v less its margin is shorter than two %v ticks of layout %q; lengthen the leaser's lease", ErrInvalidConfig, lease.TTL, g.layout.Unit, g.layout.Name)
	}
	if b, ok := g.policy.(Borrow); err == nil && ok && lease.TTL > 0 && h.window(lease.TTL) < b.MaxAhead+2*g.layout.Unit {
		err = fmt.Errorf("%w: a lease of %v less its margin leaves a window of %v, too short to borrow Borrow.MaxAhead %v ahead of the clock; lengthen the leaser's lease or lower MaxAhead",
			ErrInvalidConfig, lease.TTL, h.window(lease.TTL), b.MaxAhead)
	}
	if err != nil {
		h.releaseQuietly(g, lease, lease.HighWater)
		return Lease{}, err
	}
	return lease, nil
}

// live reports whether the lease can still be proven live.
func (h *leaseHolder) live(g *Generator) error {
	if h.mono() < h.fence.Load() {
		return nil
	}
	why := "none since the window closed"
	if p := h.lastErr.Load(); p != nil {
		why = (*p).Error()
	}
	return fmt.Errorf("%w: node %d (last failure: %s)", ErrLeaseLost, g.Node(), why)
}

// extend makes tick issuable: beyond the window of the last renewal (the
// clock stepped ahead) it renews at once. Two tries cover a renewal that
// waited for the lease being replaced.
func (h *leaseHolder) extend(ctx context.Context, g *Generator, tick int64) error {
	for range 2 {
		if tick <= g.limit.Load() {
			return nil
		}
		if err := h.live(g); err != nil {
			return err
		}
		if err := h.renew(ctx, g); err != nil {
			return fmt.Errorf("%w: %w", ErrLeaseLost, err)
		}
	}
	if tick <= g.limit.Load() {
		return nil
	}
	return fmt.Errorf("%w: node %d: the clock is past the window its renewal opened", ErrLeaseLost, g.Node())
}

// renew renews the lease.
func (h *leaseHolder) renew(ctx context.Context, g *Generator) error {
	if err := h.lock(ctx); err != nil {
		return err
	}
	defer h.unlock()
	return h.renewLocked(ctx, g)
}

// renewLocked renews the lease and raises the node's high-water mark to
// the end of the window it opens. Called with the turn.
func (h *leaseHolder) renewLocked(ctx context.Context, g *Generator) error {
	g.mu.Lock()
	cur, exact := h.cur, g.markOf(h.cur.Node)
	g.mu.Unlock()
	lease, w, err := h.renewLease(ctx, g, cur, exact)
	if err != nil {
		h.lastErr.Store(&err)
		return err
	}
	h.lastErr.Store(nil)
	g.mu.Lock()
	h.cur = lease
	h.fence.Store(max(h.fence.Load(), w.fence))
	g.limit.Store(max(g.limit.Load(), w.limit))
	g.mu.Unlock()
	return nil
}

// term is the window a renewal opens: IDs may be issued until fence, in
// monotonic nanoseconds since the holder's start, with ticks up to limit.
type term struct{ fence, limit int64 }

// renewLease renews l, raising its node's mark to the end of the window
// the renewal opens, or to exact if that is later.
func (h *leaseHolder) renewLease(ctx context.Context, g *Generator, l Lease, exact time.Time) (Lease, term, error) {
	sent, wall := h.mono(), g.nanos()
	mark := time.Unix(0, wall+int64(h.window(l.TTL)))
	if exact.After(mark) {
		mark = exact
	}
	lease, err := h.leaser.Renew(ctx, l, mark)
	if err == nil && (lease.Node != l.Node || lease.Token != l.Token || lease.TTL <= 0) {
		err = fmt.Errorf("%w: leaser renewed node %d as node %d, token %q, TTL %v", ErrInvalidConfig, l.Node, lease.Node, lease.Token, lease.TTL)
	}
	if err != nil {
		return Lease{}, term{}, fmt.Errorf("idgen: renew the lease of node %d: %w", l.Node, err)
	}
	return lease, term{sent + int64(h.window(lease.TTL)), min(g.p.tickOf(mark.UnixNano())-1, g.p.maxTick)}, nil
}

// run renews the lease a third of the way through it, sooner after a
// failure, and leases a node again when the lease was lost, until close.
func (h *leaseHolder) run(g *Generator) {
	defer close(h.done)
	t := time.NewTimer(h.ttl(g) / 3)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ttl := h.ttl(g)
		ctx, cancel := context.WithTimeout(context.Background(), max(ttl/3, 10*minRetry))
		err := h.lock(ctx)
		if err == nil {
			err = h.renewLocked(ctx, g)
			if errors.Is(err, ErrLeaseLost) {
				if !failing {
					h.cfg.Logger.Error("idgen: worker lease lost; leasing a node again", "err", err)
				}
				// The lost lease is no longer ours to release.
				if err = h.moveLocked(ctx, g, h.req, Lease{}); err != nil {
					err = fmt.Errorf("idgen: lease a node again: %w", err)
					h.lastErr.Store(&err)
				}
			}
			h.unlock()
		}
		cancel()
		switch {
		case err == nil && failing:
			h.cfg.Logger.Info("idgen: worker lease renewed again", "node", g.Node())
			failing = false
		case err != nil && !failing:
			h.cfg.Logger.Warn("idgen: worker lease renewal failed; retrying", "err", err,
				"stopsIssuingIn", time.Duration(h.fence.Load()-h.mono()).Round(time.Millisecond))
			failing = true
		}
		next := h.ttl(g) / 3
		if err != nil {
			next = min(max(next/4, minRetry), maxRetry)
		}
		t.Reset(next)
	}
}

func (h *leaseHolder) ttl(g *Generator) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return h.cur.TTL
}

// switchFrom leases a fresh node for the SwitchWorker policy and moves to
// it, releasing the current node with its exact mark, to the tail of the
// pool's queue. old is the last ID the caller found ahead of the clock: if
// it is no longer the last ID when the caller's turn comes (another caller
// switched, or issued an ID, meanwhile), nothing is done and the caller
// looks again, so that one rollback switches once.
func (h *leaseHolder) switchFrom(ctx context.Context, g *Generator, old int64) error {
	if err := h.lock(ctx); err != nil {
		return err
	}
	defer h.unlock()
	g.mu.Lock()
	cur, same := h.cur, g.state.Load() == old
	g.mu.Unlock()
	if !same {
		return nil
	}
	if err := h.moveLocked(ctx, g, LeaseRequest{MaxNode: h.req.MaxNode, Owner: h.req.Owner}, cur); err != nil {
		return fmt.Errorf("idgen: switch worker from node %d: %w", cur.Node, err)
	}
	return nil
}

// moveLocked leases a node with req and moves the generator to it from
// old, the zero Lease if there is none to release. The generator issues
// nothing from the moment it stops using old until the new lease is
// renewed, which raises the new node's mark to the end of the window it
// opens; old is released, with the mark of what was issued under it, only
// once the generator has moved. If the renewal fails, or Close comes
// first, the new lease is released and old stays current, for the caller
// to try again or for Close to release. Called with the turn.
func (h *leaseHolder) moveLocked(ctx context.Context, g *Generator, req LeaseRequest, old Lease) error {
	lease, err := h.acquire(ctx, g, req)
	if err != nil {
		return err
	}
	g.mu.Lock()
	last, ok := g.freeze()
	// Start after the node's mark and after this generator's own earlier
	// use of it, with a full sequence so that the next ID takes a new tick.
	start := max(g.tickBefore(lease.HighWater), g.tickBefore(g.markOf(lease.Node)), 0)
	g.mu.Unlock()
	if !ok {
		h.releaseQuietly(g, lease, lease.HighWater)
		return ErrClosed
	}
	w, renewed := term{maxFence, g.p.maxTick}, lease
	if lease.TTL > 0 {
		renewed, w, err = h.renewLease(ctx, g, lease, time.Unix(0, g.p.nanosOf(start+1)))
	}
	g.mu.Lock()
	if err == nil && g.closed.Load() {
		err = ErrClosed
	}
	if err != nil {
		g.unfreeze(last)
		g.mu.Unlock()
		// Nothing was issued with it: the mark it was granted with holds.
		h.releaseQuietly(g, lease, lease.HighWater)
		return err
	}
	g.retire(last)
	oldMark := g.markOf(old.Node)
	g.markUsed(lease.Node, start)
	h.cur = renewed
	h.fence.Store(w.fence)
	g.limit.Store(w.limit)
	h.lastErr.Store(nil)
	g.unfreeze(start<<g.p.timeShift | lease.Node<<g.p.nodeShift | last&g.p.genMask | g.p.seqMask)
	g.mu.Unlock()
	if old.Token != "" {
		h.releaseQuietly(g, old, oldMark)
	}
	return nil
}

// close stops the renewals and releases the lease with mark. A move in
// progress finishes first: Close leaves the generator on the old node, or
// finds it on the new one.
func (h *leaseHolder) close(g *Generator, mark time.Time) error {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	_ = h.lock(context.Background())
	defer h.unlock()
	g.mu.Lock()
	cur := h.cur
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.leaser.Release(ctx, cur, mark); err != nil && !errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("idgen: release the lease of node %d: %w", cur.Node, err)
	}
	return nil
}

// releaseQuietly gives a lease back on a path that reports another error.
func (h *leaseHolder) releaseQuietly(g *Generator, l Lease, mark time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.leaser.Release(ctx, l, mark); err != nil {
		h.cfg.Logger.Warn("idgen: release a worker lease", "node", l.Node, "err", err)
	}
}
