package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/internal/dedupekit"
)

// GuardConfig holds a Guard's optional settings. The zero value works.
type GuardConfig struct {
	// Lease is how long a claim holds while the handler runs. It is extended
	// in the background, so it bounds how long a crashed consumer blocks a
	// key, not how long a handler may run. Default 30s.
	Lease time.Duration
	// Retention is how long a done key is remembered. It must exceed the
	// broker's redelivery horizon (RocketMQ's 16 retries take 4h45m40s by
	// default, and it keeps messages for 72h), which consumer.New checks.
	// Default 72h.
	Retention time.Duration
	// ExtendEvery is how often the lease is renewed while the handler runs.
	// Default Lease/3.
	ExtendEvery time.Duration
	// CleanupTimeout bounds Complete and Release, which run even after the
	// handler's context was cancelled. Default 5s. With a context that can
	// never be cancelled (its Done is nil, as rocketmq-client-go's callback
	// context), they run with it, bounded as the claim is by the store
	// client's own timeouts.
	CleanupTimeout time.Duration
	// FailOpen runs the handler without dedupe when the store cannot be
	// reached. Default false: the message is retried later (fail-closed),
	// which loses nothing and doubles nothing.
	FailOpen bool
	// Tx is the transactional mode: each item's fn runs in a transaction
	// of the store's database whose first statement claims the key
	// ([TxClaimer.ClaimTx]), so that fn's writes and the key's record
	// commit together, exactly once. The store must be a [TxClaimer]. The
	// claimed row's lock holds the key until the transaction ends, so
	// ExtendEvery and CleanupTimeout do not apply. Default false.
	Tx bool
	// GroupCommit coalesces the claims, completions and releases of the
	// Guard's concurrent Do calls into one store call per kind, as a push
	// consumer, which delivers each message on a goroutine of its own,
	// needs for a per-message path cheaper than a naive claim and mark.
	// There is no timer: a call made while no round trip of its kind is in
	// flight is sent at once, and the calls made meanwhile (up to 256 keys)
	// go together when it returns, so at most one claim, one complete and
	// one release round trip are in flight at a time. Answers are those of
	// the calls made one after another in the order they queued (a key
	// claimed twice in one round trip is Acquired, then Busy); an error of
	// the whole round trip goes to every caller in it. A caller whose
	// context ends returns at once, and a round trip is cancelled only
	// once every caller in it has gone. Not with Tx. Default false.
	GroupCommit bool
	// LateFailure, with GroupCommit, defers completions: an item whose fn
	// succeeded is answered Completed as soon as its completion is queued.
	// On a [CompleteClaimer] store the completion rides with the next
	// claim, in its round trip, or goes alone when none comes within 1ms;
	// on another it goes at once in a round trip of its own (with those
	// queued meanwhile while one is in flight), and the next claim travels
	// while it does. A serial caller then waits for one round trip per
	// message instead of two. A completion
	// the store then fails (retried once) is reported here, later, with the
	// outcome Do would have answered (LeaseLost or Unrecorded), from
	// another goroutine. A claim of a key whose completion is still queued
	// waits for it. At most 64 completions are deferred at a time (more
	// wait for their round trip): a process killed with completions
	// deferred loses their records, and their messages' redeliveries run
	// again, up to 64 more than the handlers running at the kill. Flush
	// waits for them; a consumer's drain does. Not with Tx. Default nil:
	// Do answers once the store has recorded the completion.
	LateFailure func(ref Ref, r Result)
	// DoneCache, if positive, is how many keys the store answered or
	// recorded as done the Guard remembers, most recently used first, to
	// answer their duplicates Suppressed without a round trip. An entry
	// lives no longer than the key's retention on the local clock, so it
	// is right as long as nothing but the Guards remove done records (an
	// operator's Forget, or a Redis eviction, is not seen). Not with Tx.
	// Default 0: no cache.
	DoneCache int
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

// validate reports settings that cannot work.
func (c GuardConfig) validate() error {
	switch {
	case c.Tx && (c.GroupCommit || c.DoneCache > 0):
		return errors.New("dedupe: a transactional guard (Tx) has no group commit or done cache: its claims are statements of the handlers' transactions")
	case c.LateFailure != nil && !c.GroupCommit:
		return errors.New("dedupe: guard LateFailure defers completions in the group commit: set GroupCommit")
	case c.DoneCache < 0:
		return fmt.Errorf("dedupe: guard done cache %d must not be negative", c.DoneCache)
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

// Guard runs a handler at most once per key: claim, run, then complete on
// success or release on failure; or, in the transactional mode
// ([GuardConfig.Tx]), claim, run and commit in one transaction. It is safe
// for concurrent use.
type Guard struct {
	store Store
	// tx is the store, in the transactional mode; nil otherwise.
	tx   TxClaimer
	cfg  GuardConfig
	keep keeper
	// group is the group commit, if any, for Flush.
	group *groupCommit
}

// NewGuard returns a Guard over store.
func NewGuard(store Store, cfg GuardConfig) (*Guard, error) {
	if store == nil {
		return nil, errors.New("dedupe: nil store")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if !cfg.Tx {
		var group *groupCommit
		if cfg.GroupCommit {
			group = withGroupCommit(store)
			if cfg.LateFailure != nil {
				group.deferCompletions(cfg.LateFailure, cfg.CleanupTimeout)
			}
			store = group
		}
		if cfg.DoneCache > 0 {
			store = withDoneCache(store, cfg.DoneCache)
		}
		return &Guard{store: store, cfg: cfg, group: group, keep: keeper{store: store, lease: cfg.Lease, extendEvery: cfg.ExtendEvery}}, nil
	}
	tx, ok := store.(TxClaimer)
	if !ok {
		return nil, fmt.Errorf("dedupe: transactional mode (GuardConfig.Tx): the store (%T) cannot claim keys in a transaction; use a SQL store (sqldedupe)", store)
	}
	// The keeper extends nothing: the row lock holds each key.
	return &Guard{store: store, tx: tx, cfg: cfg}, nil
}

// Config returns the Guard's settings, defaults filled in.
func (g *Guard) Config() GuardConfig { return g.cfg }

// Flush waits until the completions deferred by [GuardConfig.LateFailure]
// of every Do that has returned are recorded, or failed and reported, or
// ctx ends. Without deferral it returns at once.
func (g *Guard) Flush(ctx context.Context) error {
	if g.group == nil {
		return nil
	}
	return g.group.flush(ctx)
}

// Interrupt cancels, with cause, the context of every fn that g runs now,
// under a claim or without one, for an owner that stops and will wait for
// them no longer, such as a consumer whose drain ran out of time. From then
// on no fn starts (and, in the transactional mode, no transaction
// begins): the items whose turn comes are Canceled, with cause. The claims
// are still completed or released as their fns return, and a transaction
// whose fn returns nil all the same is committed. Only the first call's
// cause counts.
func (g *Guard) Interrupt(cause error) { g.keep.interrupt(cause) }

// Do runs fn(ctx, i) for each of items whose key it acquires, and returns
// what it did with each, in items' order. A batch, a single message
// included, costs one [Store.Claim], one [Store.Complete] for the items whose
// fn succeeded and one [Store.Release] for the others, plus the leases'
// extensions while fn runs for longer than ExtendEvery.
//
// fn runs for every acquired item, in order, in the calling goroutine, even
// after an earlier item failed, so that a redelivery of the batch retries
// only what failed. A panic in fn is not recovered (the leases are still
// released from extension first): recover in fn.
//
// Besides the cases each [Outcome] documents:
//
//   - an item whose Ref and Fingerprint repeat an earlier item's is not
//     claimed: Suppressed when the earlier one's effect was applied, the
//     earlier one's Result when that did not run, and Busy (Wait 0)
//     when the earlier one's fn failed, for its key is free again;
//   - an item whose lease was lost before its turn does not run: Busy,
//     Wait 0, for another consumer may now hold the key;
//   - if ctx ends, or [Guard.Interrupt] is called, the items whose turn
//     has not come are Canceled;
//   - when the claim fails as a whole, every item is StoreDown, or, with
//     FailOpen, runs without a claim (Unguarded or Failed).
//
// While fn runs, every acquired item's lease is extended every ExtendEvery
// from the claim until fn has run for the last item. Once an item's lease is
// lost — the store says so, or no extension has succeeded for a whole
// lease — the context of its fn is cancelled with a cause wrapping
// [ErrLeaseLost]: fn should stop, for another consumer may take the key
// over.
//
// In the transactional mode ([GuardConfig.Tx]) the items run one after
// the other, each in a transaction of its own that claims its key
// ([TxClaimer.ClaimTx]), with no lease to extend, complete or release:
//
//   - Completed: fn returned nil, and its transaction, with the key's
//     record, committed;
//   - Failed: fn, or the commit, failed (Err says which) and the
//     transaction rolled back, so a redelivery runs at once. A commit
//     whose answer was lost may have committed; the redelivery then finds
//     the key done;
//   - Busy also when another transaction held the key past the store's
//     lock timeout (Wait 0: ask again);
//   - StoreDown: the transaction or the claim failed; with FailOpen, a
//     failed claim runs fn in a transaction of its own without a record
//     (Unguarded, or Failed), while a failed begin does not (fn's
//     transaction cannot run either).
//
// fn's context then carries its transaction ([ClaimFromContext]), which fn
// must neither commit nor roll back; a panic in fn rolls it back.
//
// fn's context carries ctx's values and deadline, and its item's claim:
// [ClaimFromContext] returns its ticket. It ends with ctx, when the lease
// is lost, when [Guard.Interrupt] is called, and once fn has returned. It
// is made cancellable only when fn first asks for its Done (or it must be
// cancelled): a fn that never waits on it costs no cancel context, timer
// or goroutine.
func (g *Guard) Do(ctx context.Context, items []Item, fn func(ctx context.Context, i int) error) []Result {
	var (
		one *single // a batch of one's slices, in one allocation
		res []Result
	)
	if len(items) == 1 {
		one = new(single)
		res = one.res[:]
	} else {
		res = make([]Result, len(items))
	}
	pending := make([]int, 0, len(items)) // the items to claim
	var (
		repeats []repeat
		seen    map[same]int // for large batches: each item's first
	)
	if len(items) > scanLimit {
		seen = make(map[same]int, len(items))
	}
	for i, it := range items {
		if err := dedupekit.CheckClaim(it.Ref.Namespace, it.Ref.Group, it.Ref.Key, g.cfg.Lease, it.Fingerprint); err != nil {
			res[i] = Result{Outcome: InvalidKey, Err: fmt.Errorf("dedupe: claim %q: %w", it.Ref, err)}
			continue
		}
		if f := firstOf(items, pending, seen, i); f >= 0 {
			repeats = append(repeats, repeat{i: i, first: f})
			continue
		}
		pending = append(pending, i)
	}
	if g.tx != nil {
		for _, i := range pending {
			res[i] = g.runTx(ctx, items[i], i, fn)
		}
	} else if len(pending) > 0 {
		start := time.Now()
		if held := g.claim(ctx, items, pending, fn, res, one); len(held) > 0 {
			g.runHeld(ctx, held, start, fn)
			g.settle(ctx, held, res, one)
		}
	}
	for _, r := range repeats {
		res[r.i] = repeated(res[r.first], items[r.i].Ref, r.first, items[r.first].Trace)
	}
	return res
}

// single holds the slices of a Do of one item, a push consumer's every
// message, so that they cost one allocation, not four.
type single struct {
	res   [1]Result
	claim [1]Item
	held  [1]lease
	ts    [1]Ticket
}

// repeat is an item whose Ref and Fingerprint are those of an earlier one.
type repeat struct{ i, first int }

// repeated is the Result of an item of ref that repeats item first, whose
// Result is r and whose Trace is trace: Suppressed when first's effect was
// applied (by first's run, whose trace it names, or by the run first's
// Result names), Busy (Wait 0) when its handler failed, for its key is
// free again, and r when it did not run.
func repeated(r Result, ref Ref, first int, trace string) Result {
	switch r.Outcome {
	case Suppressed:
		return Result{Outcome: Suppressed, Trace: r.Trace}
	case Completed, LeaseLost, Unrecorded, Unguarded:
		return Result{Outcome: Suppressed, Trace: trace}
	case Failed:
		return Result{Outcome: Busy, Err: fmt.Errorf("dedupe: %s repeats item %d of the batch, whose handler failed", ref, first)}
	}
	return r
}

// scanLimit is the largest batch whose repeats are found by a scan: most
// are small (a push consumer delivers one message at a time by default,
// and pulls 32), and then a scan costs less than a map.
const scanLimit = 32

// same is what makes an item repeat another: its Ref and Fingerprint, not
// its Trace, which names a run.
type same struct {
	Ref
	fp string
}

// firstOf returns the item among pending that items[i] repeats, or -1,
// and notes items[i] in seen when it is not nil.
func firstOf(items []Item, pending []int, seen map[same]int, i int) int {
	if seen != nil {
		k := same{items[i].Ref, items[i].Fingerprint}
		if f, ok := seen[k]; ok {
			return f
		}
		seen[k] = i
		return -1
	}
	for _, p := range pending {
		// The keys first: they are what differs, and comparing the whole
		// ref compares its namespace and group first.
		if items[p].Ref.Key == items[i].Ref.Key && items[p].Ref == items[i].Ref && items[p].Fingerprint == items[i].Fingerprint {
			return p
		}
	}
	return -1
}

// claim claims the pending items and returns the leases of those acquired;
// it sets the result of every other pending item. When the claim fails as
// a whole with FailOpen, that means running fn for each without a claim.
// one, if not nil, holds the slices of a batch of one.
func (g *Guard) claim(ctx context.Context, items []Item, pending []int, fn func(context.Context, int) error, res []Result, one *single) []lease {
	// A copy, even of all the items: the store keeps none of them, but a
	// slice handed to an interface's method escapes, and the caller's
	// items would be allocated on the heap to be claimed.
	var claims []Item
	if one != nil {
		claims = one.claim[:]
	} else {
		claims = make([]Item, len(pending))
	}
	for j, i := range pending {
		claims[j] = items[i]
	}
	answers, errs, err := g.store.Claim(ctx, claims, g.cfg.Lease)
	if err != nil {
		g.unguarded(ctx, items, pending, fn, res, err)
		return nil
	}
	acquired := 0
	for j, i := range pending {
		if errs[j] != nil {
			res[i] = Result{Outcome: InvalidKey, Err: errs[j]}
		} else if r, ok := answered(answers[j], items[i].Ref); ok {
			res[i] = r
		} else {
			acquired++
		}
	}
	if acquired == 0 {
		return nil
	}
	var held []lease
	if one != nil {
		held = one.held[:]
	} else {
		held = make([]lease, acquired)
	}
	n := 0
	for j, i := range pending {
		if errs[j] == nil && answers[j].Outcome == Acquired {
			// Field by field: a lease is large, and copying one in whole
			// costs a write barrier over all of it.
			l := &held[n]
			l.parent, l.kept, l.i = ctx, true, i
			l.c.ticket = Ticket{Ref: items[i].Ref, Token: answers[j].Token, Trace: items[i].Trace}
			n++
		}
	}
	return held
}

// answered returns the Result of an item whose claim the store answered
// with a, unless a acquired the key (ok false): the one mapping from a
// store's answer to an outcome, in both modes.
func answered(a ClaimResult, ref Ref) (r Result, ok bool) {
	switch a.Outcome {
	case Acquired:
		return Result{}, false
	case Suppressed:
		return Result{Outcome: Suppressed, Trace: a.Trace}, true
	case Reused:
		return Result{Outcome: Reused}, true
	case Busy:
		return Result{Outcome: Busy, Wait: a.Remaining}, true
	}
	return Result{Outcome: StoreDown, Err: fmt.Errorf("dedupe: claim %s answered %v", ref, a.Outcome)}, true
}

// unguarded sets the results of the pending items when their claim failed
// with err: StoreDown, or, with FailOpen, what fn did without a claim.
func (g *Guard) unguarded(ctx context.Context, items []Item, pending []int, fn func(context.Context, int) error, res []Result, err error) {
	if ctx.Err() != nil || !g.cfg.FailOpen {
		for _, i := range pending {
			if ctx.Err() != nil {
				// Not the store's fault: the caller stopped waiting.
				res[i] = Result{Outcome: Canceled, Err: context.Cause(ctx)}
			} else {
				res[i] = Result{Outcome: StoreDown, Err: fmt.Errorf("dedupe: claim %s: %w", items[i].Ref, err)}
			}
		}
		return
	}
	ls := make([]lease, len(pending))
	for j, i := range pending {
		ls[j].parent, ls[j].i = ctx, i
	}
	g.keep.add(ls, time.Now())
	// Deferred so that the contexts end even if fn panics.
	defer g.keep.remove(ls)
	for j := range ls {
		l := &ls[j]
		i := l.i
		switch {
		case ctx.Err() != nil:
			res[i] = Result{Outcome: Canceled, Err: context.Cause(ctx)}
		case l.Err() != nil:
			// Interrupted.
			res[i] = Result{Outcome: Canceled, Err: context.Cause(l)}
		default:
			if ferr := fn(l, i); ferr != nil {
				res[i] = Result{Outcome: Failed, Err: ferr}
			} else {
				res[i] = Result{Outcome: Unguarded, Err: fmt.Errorf("dedupe: claim %s: %w", items[i].Ref, err)}
			}
		}
	}
}

// runHeld keeps the leases of held, taken at or after start, alive while it
// runs fn for each item in order, and stops keeping them before it returns.
func (g *Guard) runHeld(ctx context.Context, held []lease, start time.Time, fn func(context.Context, int) error) {
	g.keep.add(held, start)
	// Deferred so that the extensions end even if fn panics.
	defer g.keep.remove(held)
	for n := range held {
		l := &held[n]
		switch {
		case ctx.Err() != nil:
			l.notRun, l.err = Canceled, context.Cause(ctx)
		case l.Err() != nil:
			cause := context.Cause(l)
			if errors.Is(cause, ErrLeaseLost) {
				l.notRun, l.err = Busy, fmt.Errorf("dedupe: %s not run: %w", l.c.ticket.Ref, cause)
			} else {
				// Interrupted.
				l.notRun, l.err = Canceled, cause
			}
		default:
			l.ran, l.err = true, fn(l, l.i)
		}
	}
}

// settle completes the claims of the items of held whose handler succeeded
// and releases the others, and sets every item's result. one, if not nil,
// holds the slices of a batch of one.
func (g *Guard) settle(ctx context.Context, held []lease, res []Result, one *single) {
	var nDone, nUndone int
	for n := range held {
		if held[n].toComplete() {
			nDone++
		} else {
			nUndone++
		}
	}
	cctx := ctx
	if ctx.Done() != nil {
		// Complete and Release run even after ctx was cancelled while the
		// handlers ran: the claims must still be settled. (A context that
		// can never be cancelled, such as rocketmq-client-go's, is used as
		// it is: no timer per message, and no watcher goroutine per
		// statement in SQL drivers.)
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), g.cfg.CleanupTimeout)
		defer cancel()
	}
	if nDone > 0 {
		errs, err := g.settleAll(cctx, held, nDone, true, one)
		if err != nil && !errors.Is(err, ErrLeaseLost) && cctx.Err() == nil {
			// Complete with the same token is idempotent: one retry turns a
			// dropped connection into a recorded success.
			errs, err = g.settleAll(cctx, held, nDone, true, one)
		}
		n := 0
		for k := range held {
			h := &held[k]
			if !h.toComplete() {
				continue
			}
			switch err := itemErr(errs, err, n); {
			case err == nil:
				res[h.i] = Result{Outcome: Completed}
			case errors.Is(err, ErrLeaseLost):
				res[h.i] = Result{Outcome: LeaseLost, Err: fmt.Errorf("dedupe: complete %s: %w", h.c.ticket.Ref, err)}
			default:
				res[h.i] = Result{Outcome: Unrecorded, Err: fmt.Errorf("dedupe: complete %s: %w", h.c.ticket.Ref, err)}
			}
			n++
		}
	}
	if nUndone > 0 {
		errs, err := g.settleAll(cctx, held, nUndone, false, one)
		n := 0
		for k := range held {
			h := &held[k]
			if !h.toRelease() {
				continue
			}
			itemErr := itemErr(errs, err, n)
			n++
			if !h.ran {
				// It keeps the reason it did not run; a failed release
				// changes nothing, for the lease expires by itself.
				res[h.i] = Result{Outcome: h.notRun, Err: h.err}
				continue
			}
			runErr := h.err
			if itemErr != nil && !errors.Is(itemErr, ErrLeaseLost) {
				// The lease expires by itself; the redelivery claims it then.
				runErr = fmt.Errorf("%w (and release failed: %v)", runErr, itemErr)
			}
			res[h.i] = Result{Outcome: Failed, Err: runErr}
		}
	}
}

// toComplete reports whether l's claim is to be completed: its fn
// succeeded.
func (l *lease) toComplete() bool { return l.ran && l.err == nil }

// toRelease reports whether l's claim is to be released: its fn failed or
// did not run.
func (l *lease) toRelease() bool { return !l.ran || l.err != nil }

// settleAll completes (complete) or releases the claims of the n items
// of held that are to be, in one call whose errors are in held's order.
func (g *Guard) settleAll(ctx context.Context, held []lease, n int, complete bool, one *single) ([]error, error) {
	pick := (*lease).toRelease
	if complete {
		pick = (*lease).toComplete
	}
	var ts []Ticket
	if one != nil {
		ts = one.ts[:0]
	} else {
		ts = make([]Ticket, 0, n)
	}
	for k := range held {
		if h := &held[k]; pick(h) {
			ts = append(ts, h.c.ticket)
		}
	}
	if complete {
		return g.store.Complete(ctx, ts, g.cfg.Retention)
	}
	return g.store.Release(ctx, ts)
}

// itemErr is item n's error in a settlement's answer: the whole call's
// error if it failed, else the item's own.
func itemErr(errs []error, err error, n int) error {
	if err != nil {
		return err
	}
	return errs[n]
}
