// Package adapter is what the consumer core gives the client adapters
// (packages remoting and grpcv5) and a user has no use for: the path of
// every delivered message ([Process]), the answer for each ([Verdict]),
// how to wait ([Waiting]), the drain and the logger.
//
// Package consumer cannot export these without offering them to every
// user, and cannot import this package's callers, so it hands its
// functions over once, when it is initialised ([Connect]); [Process],
// [Drain] and [Logger] call them with package consumer's own types, which
// this package cannot name.
package adapter

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/idemq/idemq/dedupe"
)

// Action is what the client is to do with a message.
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

// Verdict is what [Process] decided for one message.
type Verdict struct {
	Action Action
	// Outcome is the guard's answer that decided the Action.
	Outcome dedupe.Outcome
	// Err says why a message is retried or held: the handler's error, or
	// the outcome's; nil for Ack.
	Err error
	// Delay is, for Retry, how long the message should stay away: for a
	// busy key, the first delay level no shorter than the holder's
	// remaining lease; else the level of its attempt, as a 5.x group's
	// default retry policy has it (1s 5s 10s 30s …, one per attempt).
	Delay time.Duration
	// Level is Delay as a delay level: 1 for the first; 0 when Delay is
	// zero.
	Level int
}

// Waiting says how [Process] waits in process for a key that another
// consumer holds, or for a store that is down.
type Waiting struct {
	// Always waits until the holder ends, or the store answers, however
	// long: for a client that keeps the message in hand meanwhile and would
	// spend a delivery attempt handing it back. Otherwise a busy key is
	// waited for up to consumer.WithBusyWait, and past it only on the
	// message's last reconsume or when no delay level covers the holder's
	// lease; a store that is down up to consumer.WithStoreDownWait, and
	// past it only on the message's last reconsume; then the message is
	// retried.
	Always bool
	// Extend, if set, is called before each wait with the index of a
	// waiting message and how long its key's holder still holds it (zero
	// when unknown, and while the store is down), so that the client keeps
	// the message from being delivered elsewhere meanwhile. It runs in the
	// calling goroutine.
	Extend func(i int, lease time.Duration)
	// System is the messaging system the messages came from, as the
	// OpenTelemetry conventions name it (messaging.system: "kafka",
	// "nats"); "" is "rocketmq". The attributes particular to RocketMQ
	// (keys, tag) go on its spans only.
	System string
}

// ErrDraining is in the [Verdict.Err] of every message a [Drain] holds.
var ErrDraining = errors.New("consumer: draining; message left for the queue's next owner")

// The functions package consumer connected, typed with its Consumer (C)
// and Message (M); a handler is a func(context.Context, *M) error, which
// both a consumer.Handler and a function literal are.
var process, drain, logger any

// Connect takes package consumer's functions, once, when it is
// initialised: see the package doc.
func Connect[C, M any](
	p func(c *C, ctx context.Context, msgs []M, h func(context.Context, *M) error, w Waiting, vs []Verdict) []Verdict,
	d func(c *C, ctx context.Context, stop func() error) error,
	l func(c *C) *slog.Logger,
) struct{} {
	process, drain, logger = p, d, l
	return struct{}{}
}

// Process is the path of every delivered message (consumer's
// (*Consumer).process, whose doc is the contract): it runs msgs, delivered
// together, through c with h, waiting as w says, and returns one Verdict
// per message, in msgs' order: in vs if it is not nil (it then has
// len(msgs) elements), so that an adapter can allocate the verdicts with
// the messages. The client does with each message what its Verdict's
// Action says.
func Process[C, M any](ctx context.Context, c *C, msgs []M, h func(context.Context, *M) error, w Waiting, vs []Verdict) []Verdict {
	return process.(func(*C, context.Context, []M, func(context.Context, *M) error, Waiting, []Verdict) []Verdict)(c, ctx, msgs, h, w, vs)
}

// Drain stops a client, with stop, without cutting a running handler off
// between its effect and the record of it (consumer's (*Consumer).drain).
// An adapter calls it once.
func Drain[C any](ctx context.Context, c *C, stop func() error) error {
	return drain.(func(*C, context.Context, func() error) error)(c, ctx, stop)
}

// Logger returns c's logger (consumer.WithLogger): an adapter reports
// through it what it does besides [Process], such as a failed receive or
// acknowledgement.
func Logger[C any](c *C) *slog.Logger {
	return logger.(func(*C) *slog.Logger)(c)
}
