package idgen

import (
	"fmt"
	"time"
)

// A RollbackPolicy decides what a [Generator] does when its clock stands
// behind the time of the last ID it issued: after an NTP step or an operator
// setting the clock back, or at start when a [HighWaterStore] shows that an
// earlier run got further. The policies are the types in this file; nil, the
// default, makes Next fail with [ErrClockBackwards] until the clock is back
// at the time of the last ID issued. Those with an Else field hand the
// rollbacks they cannot absorb to another policy (nil failing them), so
// "wait up to 15ms, else take a fresh worker id" reads
//
//	idgen.Wait{Max: 15 * time.Millisecond, Else: idgen.SwitchWorker{}}
//
// Whatever the policy, a generator never issues the same ID twice.
type RollbackPolicy interface {
	rollbackPolicy()
}

// Wait makes Next wait, honouring its context, for the clock to catch up
// when that takes at most Max (a common choice is 15ms, past the steps NTP
// makes). Longer rollbacks go to Else.
type Wait struct {
	Max  time.Duration
	Else RollbackPolicy
}

// BumpGeneration moves to another value of the layout's generation bits and
// carries on at the clock's time. Unlike generators that count rollbacks
// modulo 2^bits, and so repeat IDs after that many, it only takes a
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

// SwitchWorker makes a generator made by [NewLeased] lease a fresh node
// from its [Leaser] and carry on with it at the clock's time. The old node
// is released with the exact mark of its last ID, so it goes to the tail of
// the pool's queue and rests there while the clock catches up. One caller
// switches; the others wait for it, as long as their contexts allow. A
// switch that fails (no node is granted, or the fresh lease cannot be
// renewed) gives the fresh node back, keeps the old one and fails Next with
// the leaser's error; the next call behind the clock tries again. A
// generator with a static node cannot switch: New refuses the policy.
type SwitchWorker struct{}

func (Wait) rollbackPolicy()           {}
func (BumpGeneration) rollbackPolicy() {}
func (Borrow) rollbackPolicy()         {}
func (SwitchWorker) rollbackPolicy()   {}

// validatePolicy checks a policy chain against the layout.
func validatePolicy(p RollbackPolicy, l Layout, top, leased bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: rollback policy: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch p := p.(type) {
	case nil:
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
		if !leased {
			return bad("SwitchWorker needs a generator made by NewLeased, which takes its fresh node from its Leaser")
		}
		return nil
	default:
		return bad("unknown policy %T", p)
	}
}
