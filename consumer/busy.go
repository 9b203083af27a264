package consumer

import (
	"context"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
)

// A busy key is asked about again after minBusyPoll, then after twice as
// long each time up to maxBusyPoll, and just after the holder's lease ends
// (plus busyMargin, so that the claim lands after the end on the store's
// clock), whichever comes first: a holder that finishes frees the key early,
// and one that died frees it at its lease's end.
const (
	minBusyPoll = 10 * time.Millisecond
	maxBusyPoll = time.Second
	busyMargin  = 10 * time.Millisecond
)

// await waits in process for the keys that other consumers hold (the
// results that are Busy) and for a store that is down (those that are
// StoreDown), claiming them again, and running their messages, once the
// keys are free or the store answers, until none is left waiting, or the
// waits are spent: a busy key can then be redelivered no sooner than its
// lease ends, and a message the store failed after the broker's delay for
// its attempt, neither on a message's last reconsume. A drain or the end
// of ctx stops the wait: the messages are held, neither acknowledged nor
// sent back.
func (c *Consumer) await(ctx context.Context, d *delivery, msgs []Message, items []dedupe.Item, of []int, res []dedupe.Result, run func(context.Context, int) error, w adapter.Waiting) {
	var waited, downWaited time.Duration
	poll := minBusyPoll
	countedBusy, countedDown := false, false
	for round := 0; ; round++ {
		var waiting []int // items
		busy, down := 0, 0
		wait, longest := time.Duration(-1), time.Duration(0)
		mustWait := w.Always
		for j, i := range of {
			switch r := res[i]; {
			case r.Outcome == dedupe.Busy:
				busy++
				if wait < 0 || r.Wait < wait {
					wait = r.Wait
				}
				longest = max(longest, r.Wait)
			case r.Outcome == dedupe.StoreDown && !c.options.guard.FailOpen:
				down++
			default:
				continue
			}
			waiting = append(waiting, j)
			if msgs[i].Reconsumed >= c.maxReconsume {
				mustWait = true
			}
		}
		if len(waiting) == 0 {
			return
		}
		if down > 0 {
			// Busy keys cannot be claimed until the store answers either.
			if !c.awaitStore(ctx, of, res, waiting, down, &downWaited, mustWait, !countedDown, w) {
				return
			}
			countedDown = true
		} else {
			if !mustWait && waited >= c.busyWait && c.levelFor(longest) > 0 {
				return // redelivered no sooner than the longest lease ends
			}
			if round > 0 || wait > 0 {
				// A holder in this process, or one that finishes early, frees
				// the key long before its lease ends: ask again soon at first,
				// then less often, and once more just after the lease's end.
				wait = min(max(wait+busyMargin, minBusyPoll), poll)
				poll = min(2*poll, maxBusyPoll)
			}
			if !mustWait && waited < c.busyWait {
				wait = min(wait, c.busyWait-waited)
			}
			if !countedBusy {
				c.stats.Waited.Add(int64(busy))
				countedBusy = true
			}
			if w.Extend != nil {
				for _, j := range waiting {
					w.Extend(of[j], res[of[j]].Wait)
				}
			}
			if !c.sleep(ctx, wait) {
				cancelWaiting(ctx, of, res, waiting)
				return
			}
			waited += wait
		}

		again := make([]dedupe.Item, len(waiting))
		for k, j := range waiting {
			again[k] = items[j]
		}
		for k, r := range c.claim(ctx, d, again, func(ctx context.Context, k int) error { return run(ctx, waiting[k]) }) {
			res[of[waiting[k]]] = r
		}
	}
}

// sleep waits for d and reports whether the wait ran out rather than ctx
// or a drain ending it.
func (c *Consumer) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil && !c.draining.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-c.drain:
	}
	return false
}

// levelFor returns the first delay level that lasts at least d, or 0 when
// none does.
func (c *Consumer) levelFor(d time.Duration) int {
	for i, l := range c.delayLevels {
		if l >= d {
			return i + 1
		}
	}
	return 0
}
