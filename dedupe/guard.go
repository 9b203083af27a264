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
func (g *Guard) Do(ctx context.Context, ref Ref, fingerprint string, fn func(context.Context) error) (Outcome, error) {
	start := time.Now()
	res, err := g.store.Claim(ctx, ClaimRequest{Ref: ref, Lease: g.cfg.Lease, Fingerprint: fingerprint})
	if err != nil {
		if errors.Is(err, ErrInvalidKey) {
			return Deferred, err
		}
		if g.cfg.FailOpen && ctx.Err() == nil {
			return Unguarded, fn(ctx)
		}
		return Deferred, fmt.Errorf("%w: claim %s: %w", ErrStoreUnavailable, ref, err)
	}
	switch res.Status {
	case Done:
		return Suppressed, nil
	case InFlight:
		return Deferred, fmt.Errorf("%w: %s held for %v more", ErrInFlight, ref, res.Remaining)
	case Conflict:
		return Deferred, fmt.Errorf("%w: %s", ErrConflict, ref)
	case Acquired:
	default:
		return Deferred, fmt.Errorf("%w: claim %s answered %v", ErrStoreUnavailable, ref, res.Status)
	}
	t := Ticket{Ref: ref, Token: res.Token}
	runErr := g.run(ctx, t, start, fn)

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.CleanupTimeout)
	defer cancel()
	if runErr != nil {
		if errors.Is(runErr, ErrLeaseLost) || errors.Is(runErr, ErrUnrecorded) {
			runErr = fmt.Errorf("dedupe: handler for %s failed: %v", ref, runErr)
		}
		if err := g.store.Release(cctx, t); err != nil && !errors.Is(err, ErrLeaseLost) {
			// The lease expires by itself; the redelivery claims it then.
			return Ran, fmt.Errorf("%w (and release failed: %v)", runErr, err)
		}
		return Ran, runErr
	}
	err = g.store.Complete(cctx, t, g.cfg.Retention)
	if err != nil && !errors.Is(err, ErrLeaseLost) && cctx.Err() == nil {
		// Complete with the same token is idempotent, so one retry turns a
		// dropped connection into a recorded success.
		err = g.store.Complete(cctx, t, g.cfg.Retention)
	}
	if err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return Ran, fmt.Errorf("complete %s: %w", ref, err)
		}
		return Ran, fmt.Errorf("%w: complete %s: %w", ErrUnrecorded, ref, err)
	}
	return Ran, nil
}

// run calls fn while a goroutine keeps the lease alive, and waits for that
// goroutine before returning. The lease was taken at or after start.
func (g *Guard) run(ctx context.Context, t Ticket, start time.Time, fn func(context.Context) error) error {
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.keep(hctx, cancel, t, start, stop)
	}()
	// Deferred so that the goroutine ends even if fn panics.
	defer func() {
		close(stop)
		<-stopped
	}()
	return fn(hctx)
}

// keep extends t's lease every ExtendEvery until stop is closed or ctx ends,
// and cancels ctx once the lease is lost: when the store says so, or when no
// extension has succeeded for a whole lease, so the store may have let it go.
func (g *Guard) keep(ctx context.Context, cancel context.CancelCauseFunc, t Ticket, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(g.cfg.ExtendEvery)
	defer tick.Stop()
	// held is when the lease held for sure; it holds until held+Lease.
	held := start
	deadline := time.NewTimer(time.Until(held.Add(g.cfg.Lease)))
	defer deadline.Stop()
	lastErr := errors.New("no answer")
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			cancel(fmt.Errorf("%w: %s not extended for %v: %w", ErrLeaseLost, t.Ref, g.cfg.Lease, lastErr))
			return
		case <-tick.C:
			sent := time.Now()
			// An answer after the lease has ended is of no use.
			ectx, ecancel := context.WithDeadline(ctx, held.Add(g.cfg.Lease))
			err := g.store.Extend(ectx, t, g.cfg.Lease)
			ecancel()
			switch {
			case err == nil:
				held = sent
				deadline.Reset(time.Until(held.Add(g.cfg.Lease)))
			case errors.Is(err, ErrLeaseLost):
				cancel(err)
				return
			default:
				// Keep trying until the lease may have ended.
				lastErr = err
			}
		}
	}
}
