package consumer

import (
	"context"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
)

// Message is one delivered message as the Consumer sees it, whichever
// client delivered it: what [Consumer.Process] needs to find its key,
// check its payload, decide and report.
type Message struct {
	// ID is the client's message id: logged, on the message's span, and
	// what [MsgID] returns.
	ID    string
	Topic string
	// Body is fingerprinted (see [WithoutFingerprint]); its size goes on
	// the span.
	Body []byte
	// Properties are the message's user properties, where the key is read
	// from ([msgkey.Property]).
	Properties map[string]string
	// Reconsumed is how many times the message was delivered before (the
	// broker's reconsume times; a 5.x client's delivery attempt minus one):
	// on its last reconsume ([WithMaxReconsumeTimes]) a busy key is always
	// waited for.
	Reconsumed int32

	// ext is the message, when rocketmq-client-go delivered it: the key
	// and the fallbacks read it, not Properties.
	ext *primitive.MessageExt
}

// fromExt describes m.
func fromExt(m *primitive.MessageExt) Message {
	return Message{ID: m.MsgId, Topic: m.Topic, Body: m.Body, Reconsumed: m.ReconsumeTimes, ext: m}
}

// Action is what the client is to do with a message, as the Consumer's
// decision table decided (see the package documentation).
type Action uint8

const (
	// Ack acknowledges the message.
	Ack Action = iota + 1
	// Retry has the message delivered again, after [Verdict.Delay].
	Retry
	// Hold neither acknowledges the message nor sends it back: it was not
	// run because the context ended (or a drain holds it), and is left for
	// whoever the broker gives it to next.
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
	// client retries with the group's default retry policy (1s 5s 10s
	// 30s …, one per attempt). Zero when no level covers a busy lease.
	Delay time.Duration

	wait time.Duration // for Busy, the holder's remaining lease
}

// Waiting says how [Consumer.Process] waits in process for a key that
// another consumer holds.
type Waiting struct {
	// Always waits until the holder ends, however long: for a client that
	// keeps the message in hand meanwhile and would spend a delivery
	// attempt handing it back. Otherwise a busy key is waited for up to
	// [WithBusyWait], and past it only on the message's last reconsume or
	// when no delay level covers the holder's lease; then it is retried.
	Always bool
	// Extend, if set, is called before each wait with the index of a
	// waiting message and how long its key's holder still holds it (zero
	// when unknown), so that the client keeps the message from being
	// delivered elsewhere meanwhile. It runs in the calling goroutine.
	Extend func(i int, lease time.Duration)
}

// Process is the entry for adapters of RocketMQ clients other than
// rocketmq-client-go's push consumer (which [Consumer.Concurrently] and
// [Consumer.Orderly] adapt), such as package consumer/grpcconsumer for
// the 5.x gRPC client. It runs the messages delivered together through the
// same path as every other message: their keys are claimed in one store
// round trip, run(ctx, i) runs for each message i whose key is acquired,
// keys held elsewhere are waited for as w says, and the decision table
// decides each message once — its [Verdict], its [Stats] counters, its log
// record and its span. The client does with each message what its
// Verdict's Action says.
//
// The contract:
//
//   - run is called at most once per message, in the calling goroutine:
//     for the messages whose keys are acquired at once in msgs' order, then
//     for each that waited for a busy key once it is free; its context
//     carries the message's claim (a lease lost cancels it) and ends with
//     ctx; a panic in run is recovered as a [PanicError] and fails that
//     message only;
//   - when ctx ends, waiting stops and the messages not run yet are Held;
//     ctx is the adapter's to end when it drains its client: a call of
//     Process is not waited for by [Consumer.Drain], which drains a
//     rocketmq-client-go push consumer (though a drain ends its waits for
//     busy keys too);
//   - the result has one Verdict per message, in msgs' order;
//   - Process is safe for concurrent use: concurrent calls share store
//     round trips when the store is a [dedupe.Batcher].
func (c *Consumer) Process(ctx context.Context, msgs []Message, run func(ctx context.Context, i int) error, w Waiting) []Verdict {
	return c.process(ctx, msgs, run, w)
}
