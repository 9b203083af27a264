package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GuardConfig holds a Guard's optional settings. The zero value works.
type GuardConfig struct {
	// Lease is how long a claim holds while the handler runs. It is extended
	// in the background, so it bounds how long a crashed consumer blocks a
	// key, not how long a handler may run. Default 30s.
	Lease time.Duration
	// Retention is how long a done key is remembered. It must exceed the
	// broker's redelivery horizon (RocketMQ retries for about 4h46m by
	// default and keeps messages for 72h). Default 72h.
	Retention time.Duration
	// ExtendEvery is how often the lease is renewed while the handler runs.
	// Default Lease/3.
	ExtendEvery time.Duration
	// CleanupTimeout bounds Complete and Release, which run even after the
	// handler's context was cancelled. Default 5s.
	CleanupTimeout time.Duration
	// FailOpen runs the handler without dedupe when the store cannot be
	// reached. Default false: the message is retried later (fail-closed),
	// which loses nothing and doubles nothing.
	FailOpen bool
}

func (c *GuardConfig) setDefaults() {
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Retention == 0 {
		c.Retention = 72 * time.Hour
	}
	if c.ExtendEvery == 0 {
		c.ExtendEvery = c.Lease / 3
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = 5 * time.Second
	}
}

// Validate reports settings that cannot work.
func (c GuardConfig) Validate() error {
	switch {
	case c.Lease <= 0:
		return fmt.Errorf("dedupe: guard lease %v must be positive", c.Lease)
	case c.Retention <= 0:
		return fmt.Errorf("dedupe: guard retention %v must be positive", c.Retention)
	case c.ExtendEvery <= 0 || c.ExtendEvery >= c.Lease:
		return fmt.Errorf("dedupe: guard extends every %v, must be positive and shorter than the lease %v", c.ExtendEvery, c.Lease)
	case c.CleanupTimeout <= 0:
		return fmt.Errorf("dedupe: guard cleanup timeout %v must be positive", c.CleanupTimeout)
	}
	return nil
}

// Outcome says what a Guard did with one message.
type Outcome int

// Guard outcomes.
const (
	// Ran: the handler ran (its error, if any, is returned beside).
	Ran Outcome = iota + 1
	// Suppressed: the key was done; the handler did not run.
	Suppressed
	// Deferred: the handler did not run and the message must be retried
	// later: the key is in flight elsewhere, conflicts, or the store failed.
	Deferred
	// Unguarded: the store failed and FailOpen ran the handler without dedupe.
	Unguarded
)

func (o Outcome) String() string {
	switch o {
	case Ran:
		return "ran"
	case Suppressed:
		return "suppressed"
	case Deferred:
		return "deferred"
	case Unguarded:
		return "unguarded"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Guard runs a handler at most once per key: claim, run, then complete on
// success or release on failure. It is safe for concurrent use.
type Guard struct {
	store Store
	cfg   GuardConfig
}

// NewGuard returns a Guard over store.
func NewGuard(store Store, cfg GuardConfig) (*Guard, error) {
	if store == nil {
		return nil, errors.New("dedupe: nil store")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Guard{store: store, cfg: cfg}, nil
}

// Do runs fn unless ref was already processed. The error tells the caller
// what to do with the message:
//
//   - nil: acknowledge it (fn succeeded, or the key was done: Suppressed).
//   - fn's error (Outcome Ran): the claim was released; retry later.
//   - [ErrInFlight], [ErrConflict] or [ErrStoreUnavailable] (Outcome
//     Deferred): fn did not run; retry later.
//   - [ErrLeaseLost] (Outcome Ran): fn succeeded but its lease had ended, so
//     another consumer may have run it too. Acknowledge it, and report it.
//   - [ErrUnrecorded] (Outcome Ran): fn succeeded but the store failed to
//     record it. Acknowledge it, and report it.
//   - [ErrInvalidKey] (Outcome Deferred): the message cannot be deduplicated.
//
// ErrLeaseLost and ErrUnrecorded thus mean that fn succeeded. When fn fails
// with an error that wraps either (as when it returns [context.Cause] of a
// context cancelled because its lease was lost), Do flattens that error to
// its text, so that a failed handler is never acknowledged.
//
// While fn runs its lease is extended every ExtendEvery. If the store
// answers that the lease is lost, or no extension succeeds for a whole
// lease, fn's context is cancelled with a cause wrapping ErrLeaseLost: fn
// should stop, for another consumer may take the key over.
//
// fn's context carries the claim: [TicketFromContext] returns its ticket,
// and fn may record the key done itself, inside its own SQL transaction,
// with [CompleteTx]; if it did and returns nil, Do does not complete the key
// again.
func (g *Guard) Do(ctx context.Context, ref Ref, fingerprint string, fn func(context.Context) error) (Outcome, error) {
	start := time.Now()
	res, err := g.store.Claim(ctx, ClaimRequest{Ref: ref, Lease: g.cfg.Lease, Fingerprint: fingerprint})
	if err != nil {
		if errors.Is(err, ErrInvalidKey) {
			return Deferred, err
		}
		if g.failOpen(ctx) {
			return Unguarded, handlerErr(ref, fn(withoutClaim(ctx)))
		}
		return Deferred, fmt.Errorf("%w: claim %s: %w", ErrStoreUnavailable, ref, err)
	}
	if res.Status != Acquired {
		return unacquired(ref, res)
	}
	t := Ticket{Ref: ref, Token: res.Token}
	c := &claim{ticket: t, retention: g.cfg.Retention}
	runErr := g.run(context.WithValue(ctx, claimKey{}, c), t, start, fn)

	cctx, cancel := g.cleanupContext(ctx)
	defer cancel()
	if runErr != nil {
		return Ran, failed(ref, runErr, g.store.Release(cctx, t))
	}
	if c.completed.Load() {
		// Recorded in fn's transaction, which committed: completing again
		// would cost a round trip, and its failure would report a recorded
		// effect as unrecorded.
		return Ran, nil
	}
	err = g.store.Complete(cctx, t, g.cfg.Retention)
	if retryComplete(cctx, err) {
		err = g.store.Complete(cctx, t, g.cfg.Retention)
	}
	return Ran, completed(ref, err)
}

// failOpen reports whether a handler may run without dedupe because the
// store failed: FailOpen is set and the caller still waits for an answer.
func (g *Guard) failOpen(ctx context.Context) bool {
	return g.cfg.FailOpen && ctx.Err() == nil
}

// unacquired is Do's answer to a claim the store answered with anything but
// Acquired.
func unacquired(ref Ref, res ClaimResult) (Outcome, error) {
	switch res.Status {
	case Done:
		return Suppressed, nil
	case InFlight:
		return Deferred, fmt.Errorf("%w: %s held for %v more", ErrInFlight, ref, res.Remaining)
	case Conflict:
		return Deferred, fmt.Errorf("%w: %s", ErrConflict, ref)
	}
	return Deferred, fmt.Errorf("%w: claim %s answered %v", ErrStoreUnavailable, ref, res.Status)
}

// cleanupContext bounds Complete and Release by CleanupTimeout, even when
// ctx was cancelled while the handler ran: the claim must still be settled.
func (g *Guard) cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), g.cfg.CleanupTimeout)
}

// handlerErr flattens a handler error that wraps ErrLeaseLost or
// ErrUnrecorded to its text: those mean that the handler succeeded, and a
// failed handler must never be acknowledged.
func handlerErr(ref Ref, err error) error {
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrUnrecorded) {
		return fmt.Errorf("dedupe: handler for %s failed: %v", ref, err)
	}
	return err
}

// failed is the error for a handler that failed with runErr and whose
// claim's release answered relErr.
func failed(ref Ref, runErr, relErr error) error {
	runErr = handlerErr(ref, runErr)
	if relErr != nil && !errors.Is(relErr, ErrLeaseLost) {
		// The lease expires by itself; the redelivery claims it then.
		return fmt.Errorf("%w (and release failed: %v)", runErr, relErr)
	}
	return runErr
}

// retryComplete reports whether a Complete that answered err is worth one
// more try: Complete with the same token is idempotent, so one retry turns a
// dropped connection into a recorded success.
func retryComplete(cctx context.Context, err error) bool {
	return err != nil && !errors.Is(err, ErrLeaseLost) && cctx.Err() == nil
}

// completed is the error for a handler that succeeded and whose claim's
// completion answered err.
func completed(ref Ref, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseLost):
		return fmt.Errorf("complete %s: %w", ref, err)
	}
	return fmt.Errorf("%w: complete %s: %w", ErrUnrecorded, ref, err)
}

// run calls fn while a goroutine keeps the lease alive, and waits for that
// goroutine before returning. The lease was taken at or after start.
func (g *Guard) run(ctx context.Context, t Ticket, start time.Time, fn func(context.Context) error) error {
	hctxs, stop := g.hold(ctx, []Ticket{t}, start)
	// Deferred so that the goroutine ends even if fn panics.
	defer stop()
	return fn(hctxs[0])
}

// hold starts a goroutine that keeps the leases of ts, taken at or after
// start, alive. It returns for each a context derived from ctx that is
// cancelled once its lease is lost, and stop, which ends the goroutine,
// waits for it and releases the contexts.
func (g *Guard) hold(ctx context.Context, ts []Ticket, start time.Time) (hctxs []context.Context, stop func()) {
	hctxs = make([]context.Context, len(ts))
	ls := make([]lease, len(ts))
	for i, t := range ts {
		var cancel context.CancelCauseFunc
		hctxs[i], cancel = context.WithCancelCause(ctx)
		ls[i] = lease{t: t, cancel: cancel, held: start, lastErr: errNoAnswer}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	// The leases are kept while fn runs, even after the caller's ctx ended
	// (fn may not have noticed yet); stop ends an extension under way.
	kctx, kcancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(stopped)
		g.keep(kctx, ls, done)
	}()
	return hctxs, func() {
		close(done)
		kcancel()
		<-stopped
		for _, l := range ls {
			l.cancel(nil)
		}
	}
}

// lease is a claim that keep keeps alive.
type lease struct {
	t Ticket
	// cancel cancels the handler's context with a cause.
	cancel context.CancelCauseFunc
	// held is when the lease held for sure; it holds until held+Lease.
	held time.Time
	// lastErr is why the last extension failed.
	lastErr error
	lost    bool
}

// errNoAnswer is a lease's lastErr until an extension fails.
var errNoAnswer = errors.New("no answer")

// lose marks l lost and cancels its handler's context with cause.
func (l *lease) lose(cause error) {
	l.lost = true
	l.cancel(cause)
}

// keep extends the leases ls every ExtendEvery until stop is closed or all
// are lost, and cancels a lease's context once it is lost: when
// the store says so, or when no extension has succeeded for a whole lease,
// so the store may have let it go. The store has no batch Extend: one
// goroutine extends the leases one after another, each call bounded by its
// lease's end, so that a batch costs no more goroutines than a message.
func (g *Guard) keep(ctx context.Context, ls []lease, stop <-chan struct{}) {
	tick := time.NewTicker(g.cfg.ExtendEvery)
	defer tick.Stop()
	deadline := time.NewTimer(g.cfg.Lease)
	defer deadline.Stop()
	for {
		// The first of the live leases to end.
		var first *lease
		for i := range ls {
			if l := &ls[i]; !l.lost && (first == nil || l.held.Before(first.held)) {
				first = l
			}
		}
		if first == nil {
			return
		}
		deadline.Reset(time.Until(first.held.Add(g.cfg.Lease)))
		select {
		case <-stop:
			return
		case <-deadline.C:
			now := time.Now()
			for i := range ls {
				if l := &ls[i]; !l.lost && !now.Before(l.held.Add(g.cfg.Lease)) {
					l.lose(fmt.Errorf("%w: %s not extended for %v: %w", ErrLeaseLost, l.t.Ref, g.cfg.Lease, l.lastErr))
				}
			}
		case <-tick.C:
			for i := range ls {
				if l := &ls[i]; !l.lost {
					g.extend(ctx, l)
				}
			}
		}
	}
}

// extend extends l once.
func (g *Guard) extend(ctx context.Context, l *lease) {
	sent := time.Now()
	// An answer after the lease has ended is of no use.
	ectx, cancel := context.WithDeadline(ctx, l.held.Add(g.cfg.Lease))
	err := g.store.Extend(ectx, l.t, g.cfg.Lease)
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
