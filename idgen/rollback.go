package idgen

import (
	"context"
	"fmt"
	"time"
)

// A RollbackPolicy decides what a [Generator] does when its clock stands
// behind the time of the last ID it issued: after an NTP step or an operator
// setting the clock back, or at start when a [HighWaterStore] shows that an
// earlier run got further. The policies are the types in this file; those
// with an Else field hand the rollbacks they cannot absorb to another
// policy (nil meaning [Refuse]), so seed 000's "wait up to 15ms, else take a
// fresh worker id" reads
//
//	idgen.Wait{Max: 15 * time.Millisecond, Else: idgen.SwitchWorker{Source: pool}}
//
// Whatever the policy, a generator never issues the same ID twice.
type RollbackPolicy interface {
	rollbackPolicy()
}

// Refuse makes Next fail with [ErrClockBackwards] until the clock is back
// at the time of the last ID issued. It is the default.
type Refuse struct{}

// Wait makes Next wait, honouring its context, for the clock to catch up
// when that takes at most Max (seed 000 waits up to 15ms). Longer rollbacks
// go to Else.
type Wait struct {
	Max  time.Duration
	Else RollbackPolicy
}

// BumpGeneration moves to another value of the layout's generation bits and
// carries on at the clock's time (seed 002). Unlike seed 002, which wraps
// around after 2^bits rollbacks and can then repeat IDs, it only takes a
// generation whose IDs all lie before the clock; when none is left — or
// after a restart, when every generation may have been used up to the high-
// water mark — the rollback goes to Else. The layout needs GenerationBits.
type BumpGeneration struct {
	Else RollbackPolicy
}

// Borrow turns the generator into a monotonic logical clock: it never steps
// back with the clock, and when a tick's sequence is full it moves on to the
// next tick without waiting, so the time in its IDs may run ahead of the
// clock, by at most MaxAhead. Generator.Ahead reports by how much. At
// MaxAhead a full sequence waits for the clock; a rollback larger than
// MaxAhead goes to Else. Borrow cannot be the Else of another policy.
type Borrow struct {
	MaxAhead time.Duration
	Else     RollbackPolicy
}

// SwitchWorker asks Source for a fresh node id and carries on with it at the
// clock's time (seed 000's queue of worker ids). The generator refuses a node
// id that it used itself at or after the clock's time. A generator made by
// [NewLeased] with a nil Source leases a fresh node from its [Leaser] and
// releases the old one with its high-water mark, so the old node goes to
// the tail of the pool's queue.
type SwitchWorker struct {
	Source WorkerSource
}

func (Refuse) rollbackPolicy()         {}
func (Wait) rollbackPolicy()           {}
func (BumpGeneration) rollbackPolicy() {}
func (Borrow) rollbackPolicy()         {}
func (SwitchWorker) rollbackPolicy()   {}

// validatePolicy checks a policy chain against the layout.
func validatePolicy(p RollbackPolicy, l Layout, top, leased bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("idgen: rollback policy: %s: %w", fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	switch p := p.(type) {
	case nil, Refuse:
		return nil
	case Wait:
		if p.Max <= 0 {
			return bad("Wait.Max %v not positive", p.Max)
		}
		return validatePolicy(p.Else, l, false, leased)
	case BumpGeneration:
		if l.GenerationBits == 0 {
			return bad("BumpGeneration needs a layout with generation bits; %q has none", l.Name)
		}
		return validatePolicy(p.Else, l, false, leased)
	case Borrow:
		if !top {
			return bad("Borrow must be the first policy")
		}
		if p.MaxAhead < l.Unit {
			return bad("Borrow.MaxAhead %v shorter than the unit %v", p.MaxAhead, l.Unit)
		}
		return validatePolicy(p.Else, l, false, leased)
	case SwitchWorker:
		if p.Source == nil && !leased {
			return bad("SwitchWorker without a Source (only a leased generator takes its fresh node from its Leaser)")
		}
		return nil
	default:
		return bad("unknown policy %T", p)
	}
}

// A WorkerSource supplies node ids to the [SwitchWorker] policy. Leasing
// backends (Redis, SQL) implement it; it must be safe for concurrent use.
type WorkerSource interface {
	// NextWorker returns the node id a generator switches to, retiring
	// retired, with which it issued IDs up to lastUsed. The id returned
	// must not be held by any other generator, nor have been used by any
	// generator at or after the current time. The source may hand retired
	// out again once the clock has passed lastUsed; a queue that puts
	// retired ids at its tail (seed 000) does so in practice. ctx bounds
	// the call.
	NextWorker(ctx context.Context, retired int64, lastUsed time.Time) (int64, error)
}
