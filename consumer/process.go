package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
)

// process is the path of every delivered message, the one entry point the
// client adapters call (through [adapter.Process]). It runs the messages delivered together: their keys
// are claimed in one store round trip, h runs for each message whose key is
// acquired, keys held elsewhere and a store that is down are waited for as
// w says, and the decision table decides each message once — its
// verdict, its [Stats] counters, its log record and its span. The client
// does with each message what its verdict's Action says.
//
// The contract:
//
//   - h is called at most once per message, in the calling goroutine, with
//     a pointer into msgs: for the messages whose keys are acquired at once
//     in msgs' order, then for each that waited for a busy key once it is
//     free, or for the store once it answers; its context carries the
//     message's claim (a lease lost cancels it), ends with ctx, and ends
//     when a drain runs out of time; a panic in h is recovered
//     as a [PanicError] and fails that message only;
//   - when ctx ends, waiting stops and the messages not run yet are Held;
//   - once a drain has begun, h runs no more: the messages of a call that
//     starts then, and those of a call under way that are not acknowledged,
//     are Held with an Err that wraps [adapter.ErrDraining], and such a
//     call returns only once the drain has stopped the client, which then no
//     longer acts on the answer;
//   - vs (len(msgs) of them) receives one verdict per message, in msgs'
//     order;
//   - process is safe for concurrent use: concurrent calls share store
//     round trips.
func (c *Consumer) process(ctx context.Context, msgs []Message, h Handler, w adapter.Waiting, vs []adapter.Verdict) {
	if !c.enter() {
		c.refuse(ctx, msgs, vs)
		<-c.shut
		return
	}
	c.handle(ctx, msgs, h, w, vs)
	c.leave()
	if !c.draining.Load() {
		return
	}
	held := false
	for i := range vs {
		if vs[i].Action != adapter.Ack {
			// Sent back now, a message would spend a reconsume that its
			// next owner can spare it.
			err := vs[i].Err
			if !errors.Is(err, adapter.ErrDraining) {
				err = fmt.Errorf("%w: %w", adapter.ErrDraining, err)
			}
			vs[i] = adapter.Verdict{Action: adapter.Hold, Outcome: vs[i].Outcome, Err: err}
			held = true
		}
	}
	if held {
		<-c.shut
	}
}

// refuse holds msgs, delivered once a drain has begun, without running
// them, and puts their verdicts in vs.
func (c *Consumer) refuse(ctx context.Context, msgs []Message, vs []adapter.Verdict) {
	c.stats.Delivered.Add(int64(len(msgs)))
	for i := range msgs {
		r := dedupe.Result{Outcome: dedupe.Canceled, Err: adapter.ErrDraining}
		c.decide(ctx, &msgs[i], "", r)
		vs[i] = adapter.Verdict{Action: adapter.Hold, Outcome: r.Outcome, Err: retryErr(&msgs[i], r)}
	}
}

// handle runs h for msgs through the guard, waits for keys that other
// consumers hold as w says, and decides, message by message, in the table
// of decide.go, into vs.
func (c *Consumer) handle(ctx context.Context, msgs []Message, h Handler, w adapter.Waiting, vs []adapter.Verdict) {
	c.stats.Delivered.Add(int64(len(msgs)))
	keys := make([]string, len(msgs))
	// The result and item of a delivery of one message, the default, take
	// no allocation (a make of a length not constant does only up to 32
	// bytes, and a Result is larger).
	var (
		oneRes [1]dedupe.Result
		one    [1]dedupe.Item
	)
	res, items := oneRes[:], one[:0]
	if len(msgs) != 1 {
		res, items = make([]dedupe.Result, len(msgs)), make([]dedupe.Item, 0, len(msgs))
	}
	of := make([]int, 0, len(msgs)) // the message of each item
	for i := range msgs {
		key, err := msgs[i].key(c.fallbacks)
		if err != nil {
			c.stats.NoKey.Add(1)
			res[i] = dedupe.Result{Outcome: dedupe.InvalidKey, Err: err}
			continue
		}
		keys[i] = key
		it := dedupe.Item{Ref: dedupe.Ref{Namespace: c.namespace, Group: c.group, Key: key}}
		if !c.noFingerprint {
			it.Fingerprint = c.strings.Fingerprint(msgs[i].Body)
		}
		items = append(items, it)
		of = append(of, i)
	}
	d := c.observe(ctx, msgs, keys, w.System)
	d.name(items, of)
	if len(items) > 0 {
		run := func(ctx context.Context, i int) error { return h(ctx, &msgs[i]) }
		fn := func(ctx context.Context, j int) error { return d.run(ctx, of[j], run) }
		for j, r := range c.claim(ctx, d, items, fn) {
			res[of[j]] = r
		}
		c.await(ctx, d, msgs, items, of, res, fn, w)
	}

	for i, r := range res {
		act := c.decide(ctx, &msgs[i], keys[i], r)
		vs[i] = adapter.Verdict{Action: act, Outcome: r.Outcome}
		if act == adapter.Ack {
			continue
		}
		// Held messages are retried too, by whoever gets them next.
		c.stats.Retried.Add(1)
		vs[i].Err = retryErr(&msgs[i], r)
		if act == adapter.Retry {
			if l := c.levelOf(&msgs[i], r); l > 0 {
				vs[i].Level, vs[i].Delay = l, c.delayLevels[l-1]
			}
		}
	}
	d.finish(res)
}

// levelOf is the delay level at which msg, retried after r, should come
// back (see [adapter.Verdict].Delay), or 0 for none.
func (c *Consumer) levelOf(msg *Message, r dedupe.Result) int {
	if r.Outcome == dedupe.Busy {
		// Not before the holder's lease ends: a redelivery sooner would
		// find the key busy again and spend another attempt.
		return c.levelFor(r.Wait)
	}
	return min(int(max(msg.Reconsumed, 0)), len(c.delayLevels)-1) + 1
}
