package consumer

import (
	"context"
	"time"

	"github.com/idemq/idemq/dedupe"
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

// awaitBusy waits in process for the keys that other consumers hold (the
// results that are Busy) and runs their messages once they are free, until
// none is busy, or the busy wait is spent and every busy key can be
// redelivered no sooner than its lease ends without spending a message's
// last reconsume. A drain or the end of ctx stops the wait: the messages
// are held, neither acknowledged nor sent back.
func (c *Consumer) awaitBusy(ctx context.Context, d *delivery, msgs []Message, items []dedupe.Item, of []int, res []dedupe.Result, run func(context.Context, int) error, w Waiting) {
	var waited time.Duration
	poll := minBusyPoll
	for round := 0; ; round++ {
		var busy []int // items
		wait, longest := time.Duration(-1), time.Duration(0)
		mustWait := w.Always
		for j, i := range of {
			r := res[i]
			if r.Outcome != dedupe.Busy {
				continue
			}
			busy = append(busy, j)
			if wait < 0 || r.Wait < wait {
				wait = r.Wait
			}
			longest = max(longest, r.Wait)
			if msgs[i].Reconsumed >= c.maxReconsume {
				mustWait = true
			}
		}
		if len(busy) == 0 {
			return
		}
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
		if round == 0 {
			c.stats.Waited.Add(int64(len(busy)))
		}
		if w.Extend != nil {
			for _, j := range busy {
				w.Extend(of[j], res[of[j]].Wait)
			}
		}
		if !c.sleep(ctx, wait) {
			err := ErrDraining
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			for _, j := range busy {
				res[of[j]] = dedupe.Result{Outcome: dedupe.Canceled, Err: err}
			}
			return
		}
		waited += wait

		again := make([]dedupe.Item, len(busy))
		for k, j := range busy {
			again[k] = items[j]
		}
		for k, r := range d.do(ctx, c.guard, again, func(ctx context.Context, k int) error { return run(ctx, busy[k]) }) {
			res[of[busy[k]]] = r
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
