package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/dedupekit"
)

// Action is what the client is to do with a message. The Consumer's one
// decision table gives every outcome of the guard ([dedupe.Outcome]) its
// action, its [Stats] counter and, where someone must hear of it, a log
// record:
//
//	outcome      action  logged
//	completed    Ack
//	suppressed   Ack
//	failed       Retry   (the handler's error is returned to the client)
//	busy         Retry   only once waiting in process is spent, no sooner than the holder's lease ends
//	reused       Retry   error (the key is recorded with another body)
//	store-down   Retry   only once waiting in process for the store is spent (fail-closed; with FailOpen the handler runs: unguarded)
//	invalid-key  Retry   error (no key, or one that cannot be stored)
//	lease-lost   Ack     error (the effect may have been applied twice)
//	unrecorded   Ack     error (the effect ran; its record failed)
//	unguarded    Ack     warn
//	canceled     Hold    (a drain: left for the queue's next owner)
//
// A lease-lost or unrecorded message is acknowledged because a retry
// cannot undo an effect that ran; alert on their counts. A store that is
// down is logged once when claims begin to fail and once when it answers
// again, not per message (see [WithStoreDownWait]).
type Action uint8

const (
	// Ack acknowledges the message.
	Ack Action = iota + 1
	// Retry has the message delivered again, after [Verdict.Delay].
	Retry
	// Hold neither acknowledges the message nor sends it back: a drain
	// holds it, or it was not run because the context ended; it is left
	// for whoever the broker gives it to next.
	Hold
)

// Verdict is what [Consumer.Process] decided for one message.
type Verdict struct {
	Action Action
	// Outcome is the guard's answer the decision table decided on.
	Outcome dedupe.Outcome
	// Err says why a message is retried or held: the handler's error, or
	// the outcome's; nil for Ack.
	Err error
	// Delay is, for Retry, how long the message should stay away: for a
	// busy key, the first delay level ([WithDelayLevels]) no shorter than
	// the holder's remaining lease; else the level of its attempt, as a 5.x
	// group's default retry policy has it (1s 5s 10s 30s …, one per
	// attempt).
	Delay time.Duration
	// Level is Delay as a delay level: 1 for the first of
	// [WithDelayLevels]; 0 when Delay is zero.
	Level int
}

// Waiting says how [Consumer.Process] waits in process for a key that
// another consumer holds, or for a store that is down.
type Waiting struct {
	// Always waits until the holder ends, or the store answers, however
	// long: for a client that keeps the message in hand meanwhile and would
	// spend a delivery attempt handing it back. Otherwise a busy key is
	// waited for up to [WithBusyWait], and past it only on the message's
	// last reconsume or when no delay level covers the holder's lease; a
	// store that is down up to [WithStoreDownWait], and past it only on the
	// message's last reconsume; then the message is retried.
	Always bool
	// Extend, if set, is called before each wait with the index of a
	// waiting message and how long its key's holder still holds it (zero
	// when unknown, and while the store is down), so that the client keeps
	// the message from being delivered elsewhere meanwhile. It runs in the
	// calling goroutine.
	Extend func(i int, lease time.Duration)
}

// Process is the path of every delivered message, the one entry point the
// client adapters call. It runs the messages delivered together: their keys
// are claimed in one store round trip, h runs for each message whose key is
// acquired, keys held elsewhere and a store that is down are waited for as
// w says, and the decision table decides each message once — its
// [Verdict], its [Stats] counters, its log record and its span. The client
// does with each message what its Verdict's Action says.
//
// The contract:
//
//   - h is called at most once per message, in the calling goroutine, with
//     a pointer into msgs: for the messages whose keys are acquired at once
//     in msgs' order, then for each that waited for a busy key once it is
//     free, or for the store once it answers; its context carries the
//     message's claim (a lease lost cancels it), ends with ctx, and ends
//     when a [Consumer.Drain] runs out of time; a panic in h is recovered
//     as a [PanicError] and fails that message only;
//   - when ctx ends, waiting stops and the messages not run yet are Held;
//   - once a Drain has begun, h runs no more: the messages of a call that
//     starts then, and those of a call under way that are not acknowledged,
//     are Held with an Err that wraps [ErrDraining], and such a call
//     returns only once the Drain has stopped the client, which then no
//     longer acts on the answer;
//   - the result has one Verdict per message, in msgs' order;
//   - Process is safe for concurrent use: concurrent calls share store
//     round trips.
func (c *Consumer) Process(ctx context.Context, msgs []Message, h Handler, w Waiting) []Verdict {
	if !c.enter() {
		vs := c.refuse(ctx, msgs)
		<-c.shut
		return vs
	}
	vs := c.process(ctx, msgs, h, w)
	c.leave()
	if !c.draining.Load() {
		return vs
	}
	held := false
	for i := range vs {
		if vs[i].Action != Ack {
			// Sent back now, a message would spend a reconsume that its
			// next owner can spare it.
			err := vs[i].Err
			if !errors.Is(err, ErrDraining) {
				err = fmt.Errorf("%w: %w", ErrDraining, err)
			}
			vs[i] = Verdict{Action: Hold, Outcome: vs[i].Outcome, Err: err}
			held = true
		}
	}
	if held {
		<-c.shut
	}
	return vs
}

// refuse holds msgs, delivered once a drain has begun, without running
// them.
func (c *Consumer) refuse(ctx context.Context, msgs []Message) []Verdict {
	c.stats.Delivered.Add(int64(len(msgs)))
	vs := make([]Verdict, len(msgs))
	for i := range msgs {
		r := dedupe.Result{Outcome: dedupe.Canceled, Err: ErrDraining}
		c.decide(ctx, &msgs[i], "", r)
		vs[i] = Verdict{Action: Hold, Outcome: r.Outcome, Err: retryErr(&msgs[i], r)}
	}
	return vs
}

// process runs h for msgs through the guard, waits for keys that other
// consumers hold as w says, and decides, message by message, in the table
// of decide.go.
func (c *Consumer) process(ctx context.Context, msgs []Message, h Handler, w Waiting) []Verdict {
	c.stats.Delivered.Add(int64(len(msgs)))
	keys := make([]string, len(msgs))
	res := make([]dedupe.Result, len(msgs))
	// The item of a delivery of one message, the default, takes no
	// allocation.
	var one [1]dedupe.Item
	items := one[:0]
	if len(msgs) > 1 {
		items = make([]dedupe.Item, 0, len(msgs))
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
			it.Fingerprint = dedupekit.Fingerprint(msgs[i].Body)
		}
		items = append(items, it)
		of = append(of, i)
	}
	d := c.observe(ctx, msgs, keys)
	if len(items) > 0 {
		run := func(ctx context.Context, i int) error { return h(ctx, &msgs[i]) }
		fn := func(ctx context.Context, j int) error { return d.run(ctx, of[j], run) }
		for j, r := range c.claim(ctx, d, items, fn) {
			res[of[j]] = r
		}
		c.await(ctx, d, msgs, items, of, res, fn, w)
	}

	vs := make([]Verdict, len(msgs))
	for i, r := range res {
		act := c.decide(ctx, &msgs[i], keys[i], r)
		vs[i] = Verdict{Action: act, Outcome: r.Outcome}
		if act == Ack {
			continue
		}
		// Held messages are retried too, by whoever gets them next.
		c.stats.Retried.Add(1)
		vs[i].Err = retryErr(&msgs[i], r)
		if act == Retry {
			if l := c.levelOf(&msgs[i], r); l > 0 {
				vs[i].Level, vs[i].Delay = l, c.delayLevels[l-1]
			}
		}
	}
	d.finish(res)
	return vs
}

// levelOf is the delay level at which msg, retried after r, should come
// back (see [Verdict.Delay]), or 0 for none.
func (c *Consumer) levelOf(msg *Message, r dedupe.Result) int {
	if r.Outcome == dedupe.Busy {
		// Not before the holder's lease ends: a redelivery sooner would
		// find the key busy again and spend another attempt.
		return c.levelFor(r.Wait)
	}
	return min(int(max(msg.Reconsumed, 0)), len(c.delayLevels)-1) + 1
}
