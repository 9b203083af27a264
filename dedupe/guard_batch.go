package dedupe

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BatchItem is one message of a batch given to [Guard.DoBatch].
type BatchItem struct {
	Ref Ref
	// Fingerprint identifies the payload as in [ClaimRequest]; empty
	// disables the check.
	Fingerprint string
}

// DoBatch is [Guard.Do] for a batch of messages delivered together, in at
// most three store round trips instead of two per message: one [ClaimBatch]
// for every item, one [CompleteBatch] for the items whose fn succeeded and
// one [ReleaseBatch] for the others (a store that is not a [Batcher] gets
// one call per item instead), plus the leases' extensions while fn runs for
// longer than ExtendEvery. fn(ctx, i) handles items[i]; it runs for every
// acquired item, in order, in the calling goroutine, even after an earlier
// item failed, so that a redelivery of the batch retries only what failed.
//
// The outcome and error of each item, in items' order, mean what Do's do,
// and have the same causes, with three additions:
//
//   - An item whose Ref and Fingerprint repeat an earlier item's is not
//     claimed: it is Suppressed when the earlier item's fn succeeded or
//     the key was done, Deferred with the earlier item's error when that
//     was Deferred, and Deferred with [ErrInFlight] when the earlier
//     item's fn failed.
//   - An item whose lease was lost before its turn (see below) does not
//     run: it is Deferred with [ErrInFlight], for another consumer may now
//     hold the key.
//   - If ctx ends, the items whose turn has not come do not run: they are
//     Deferred with an error wrapping ctx's error.
//
// An item that fails [ClaimRequest.Validate] is Deferred with
// [ErrInvalidKey] and never runs, even with FailOpen. When the claim fails
// as a whole, every other item is Deferred with [ErrStoreUnavailable], or,
// with FailOpen, runs Unguarded.
//
// fn's context carries its item's claim, as Do's does: [TicketFromContext]
// returns its ticket, and an item that fn records itself with [CompleteTx]
// is left out of the CompleteBatch.
//
// Every acquired item's lease is extended every ExtendEvery from the claim
// until fn has run for the last item, so that neither the items waiting for
// their turn nor those waiting for the batch's completion lose it. Once an
// item's lease is lost, the context of its fn is cancelled with a cause
// wrapping ErrLeaseLost, as in Do.
func (g *Guard) DoBatch(ctx context.Context, items []BatchItem, fn func(ctx context.Context, i int) error) ([]Outcome, []error) {
	outs := make([]Outcome, len(items))
	errs := make([]error, len(items))
	set := func(i int, out Outcome, err error) { outs[i], errs[i] = out, err }

	var (
		reqs    []ClaimRequest
		claimed []int // the index in items of each request
		repeats []repeat
		first   = make(map[BatchItem]int, len(items))
	)
	for i, it := range items {
		req := ClaimRequest{Ref: it.Ref, Lease: g.cfg.Lease, Fingerprint: it.Fingerprint}
		if err := req.Validate(); err != nil {
			set(i, Deferred, fmt.Errorf("dedupe: claim %q: %w", it.Ref, err))
			continue
		}
		if f, ok := first[it]; ok {
			repeats = append(repeats, repeat{i: i, first: f})
			continue
		}
		first[it] = i
		reqs = append(reqs, req)
		claimed = append(claimed, i)
	}

	if len(reqs) > 0 {
		start := time.Now()
		if held := g.claimBatch(ctx, items, reqs, claimed, fn, set); len(held) > 0 {
			g.runHeld(ctx, held, start, fn)
			g.settle(ctx, held, set)
		}
	}

	for _, r := range repeats {
		switch out, err := outs[r.first], errs[r.first]; {
		case out == Suppressed || (out == Ran || out == Unguarded) && succeeded(err):
			set(r.i, Suppressed, nil)
		case out == Deferred:
			set(r.i, Deferred, err)
		default:
			set(r.i, Deferred, fmt.Errorf("%w: %s repeats item %d of the batch, whose handler failed", ErrInFlight, items[r.i].Ref, r.first))
		}
	}
	return outs, errs
}

// repeat is an item whose Ref and Fingerprint are those of an earlier one.
type repeat struct{ i, first int }

// succeeded reports whether err, the error of an item that ran, means that
// its handler succeeded.
func succeeded(err error) bool {
	return err == nil || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrUnrecorded)
}

// claimBatch claims reqs, the requests of items[claimed[j]], and returns the
// acquired items. It sets the answer of every other item; when the claim
// fails as a whole with FailOpen, that means running fn for each.
func (g *Guard) claimBatch(ctx context.Context, items []BatchItem, reqs []ClaimRequest, claimed []int, fn func(context.Context, int) error, set func(int, Outcome, error)) []heldItem {
	res, errs, err := ClaimBatch(ctx, g.store, reqs)
	if err != nil {
		open := g.failOpen(ctx)
		for _, i := range claimed {
			if open {
				set(i, Unguarded, handlerErr(items[i].Ref, fn(withoutClaim(ctx), i)))
			} else {
				set(i, Deferred, fmt.Errorf("%w: claim %s in a batch of %d: %w", ErrStoreUnavailable, items[i].Ref, len(reqs), err))
			}
		}
		return nil
	}
	var held []heldItem
	for j, i := range claimed {
		switch {
		case errs[j] != nil:
			set(i, Deferred, errs[j])
		case res[j].Status != Acquired:
			out, err := unacquired(items[i].Ref, res[j])
			set(i, out, err)
		default:
			held = append(held, heldItem{i: i, t: Ticket{Ref: items[i].Ref, Token: res[j].Token}})
		}
	}
	return held
}

// heldItem is an item whose claim was acquired: its index, its ticket,
// whether its handler ran, whether the handler recorded the key itself
// ([CompleteTx]) and the error of its handler, then of its settlement.
type heldItem struct {
	i        int
	t        Ticket
	ran      bool
	recorded bool
	err      error
}

// runHeld keeps the leases of held, taken at or after start, alive while it
// runs fn for each item in order, and stops keeping them before it returns.
func (g *Guard) runHeld(ctx context.Context, held []heldItem, start time.Time, fn func(context.Context, int) error) {
	hctxs, stop := g.hold(ctx, tickets(held), start)
	// Deferred so that the goroutine ends even if fn panics.
	defer stop()
	for k := range held {
		h := &held[k]
		switch {
		case ctx.Err() != nil:
			h.err = fmt.Errorf("dedupe: %s not run: %w", h.t.Ref, context.Cause(ctx))
		case hctxs[k].Err() != nil:
			// The cause wraps ErrLeaseLost, which would mean that the
			// handler succeeded: keep only its text.
			h.err = fmt.Errorf("%w: %s not run: %v", ErrInFlight, h.t.Ref, context.Cause(hctxs[k]))
		default:
			c := &claim{ticket: h.t, retention: g.cfg.Retention}
			h.ran, h.err = true, fn(context.WithValue(hctxs[k], claimKey{}, c), h.i)
			h.recorded = c.completed.Load()
		}
	}
}

// settle completes the claims of the items of held whose handler succeeded
// and releases the others, and sets every item's answer.
func (g *Guard) settle(ctx context.Context, held []heldItem, set func(int, Outcome, error)) {
	var done, undone []heldItem
	for _, h := range held {
		switch {
		case h.ran && h.err == nil && h.recorded:
			// Recorded in fn's transaction, which committed, as in Do.
			set(h.i, Ran, nil)
		case h.ran && h.err == nil:
			done = append(done, h)
		default:
			undone = append(undone, h)
		}
	}
	if len(done) > 0 {
		cctx, cancel := g.cleanupContext(ctx)
		ts := tickets(done)
		errs, err := CompleteBatch(cctx, g.store, ts, g.cfg.Retention)
		if retryComplete(cctx, err) {
			errs, err = CompleteBatch(cctx, g.store, ts, g.cfg.Retention)
		}
		cancel()
		for k, h := range done {
			set(h.i, Ran, completed(h.t.Ref, itemErr(errs, err, k)))
		}
	}
	if len(undone) > 0 {
		cctx, cancel := g.cleanupContext(ctx)
		errs, err := ReleaseBatch(cctx, g.store, tickets(undone))
		cancel()
		for k, h := range undone {
			if !h.ran {
				// It keeps the reason it did not run; a failed release
				// changes nothing, for the lease expires by itself.
				set(h.i, Deferred, h.err)
				continue
			}
			set(h.i, Ran, failed(h.t.Ref, h.err, itemErr(errs, err, k)))
		}
	}
}

// itemErr is item k's error in a batch call's answer: the whole call's
// error if it failed, else the item's own.
func itemErr(errs []error, err error, k int) error {
	if err != nil {
		return err
	}
	return errs[k]
}

func tickets(hs []heldItem) []Ticket {
	ts := make([]Ticket, len(hs))
	for k, h := range hs {
		ts[k] = h.t
	}
	return ts
}
