package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
	// Routes the client's logs to slog at warn (see its doc).
	_ "github.com/idemq/idemq/rmqlog"
)

// Handler processes one message. A nil error acknowledges it; any error
// asks for a redelivery.
type Handler func(ctx context.Context, msg *primitive.MessageExt) error

// Callback is the function a rocketmq.PushConsumer subscribes with.
type Callback = func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)

// Consumer runs handlers at most once per (consumer group, message key) on
// top of a [dedupe.Store]: the one entry point of the receiving side. Its
// methods adapt a handler for a concurrently ([Consumer.Concurrently]) or
// orderly ([Consumer.Orderly]) consuming push consumer, and a handler that
// writes through a SQL transaction ([Consumer.Tx]); [Consumer.Drain] stops
// the push consumer without cutting off a running handler. It is safe for
// concurrent use.
type Consumer struct {
	options
	group string
	store dedupe.Store // as given, for Tx
	guard *dedupe.Guard
	obs   *observer

	// Draining: running counts callbacks under way; once draining is set
	// none starts a handler, and held callbacks wait for shut.
	running  atomic.Int64
	idle     chan struct{} // signalled when running drops to 0 while draining
	draining atomic.Bool
	drain    chan struct{} // closed when draining starts
	shut     chan struct{} // closed once the push consumer is shut down
	// stop is cancelled when a drain runs out of time: the handlers still
	// running see their context end.
	stop       context.Context
	cancelStop context.CancelFunc
}

// New returns a Consumer for the consumer group group that records keys in
// store. With store a [dedupe.Batcher] (the Redis and SQL stores are), the
// claims and completions of handlers running at the same time share store
// round trips.
func New(store dedupe.Store, group string, opts ...Option) (*Consumer, error) {
	if store == nil {
		return nil, errors.New("consumer: nil store")
	}
	o := options{
		logger:       slog.Default(),
		stats:        new(Stats),
		maxReconsume: defaultMaxReconsume,
		delayLevels:  defaultDelayLevels,
		suspend:      time.Second,
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	probe := dedupe.Ref{Namespace: o.namespace, Group: group, Key: "probe"}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	guard, err := dedupe.NewGuard(dedupe.WithGroupCommit(store), o.guard)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if o.busyWait == 0 {
		o.busyWait = guard.Config().Lease
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	obs, err := newObserver(o.telemetry, group)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Consumer{
		options: o, group: group, store: store, guard: guard, obs: obs,
		idle: make(chan struct{}, 1), drain: make(chan struct{}), shut: make(chan struct{}),
		stop: stop, cancelStop: cancel,
	}, nil
}

// Stats returns the counters the Consumer updates (those given with
// [WithStats], or its own).
func (c *Consumer) Stats() *Stats { return c.stats }

// Logger returns the logger given with [WithLogger], or slog.Default():
// an adapter of another client reports through it what it does besides
// [Consumer.Process], such as a failed receive or acknowledgement.
func (c *Consumer) Logger() *slog.Logger { return c.logger }

// Concurrently adapts h for a concurrently consuming push consumer. The
// messages the client delivers together (one by default;
// rmq.WithConsumeMessageBatchMaxSize for more) are claimed in one store
// round trip and completed in one, and h runs for each acquired message in
// order, even after an earlier one failed: on redelivery those completed
// are suppressed, so only what failed runs again. The callback answers
// ConsumeRetryLater if any message must be retried (the client resends the
// whole batch), else ConsumeSuccess. A panic in h is recovered as a
// [PanicError] and fails that message only.
//
// A message whose key another consumer holds is waited for (see
// [WithBusyWait]); it never spends the message's last reconsume.
func (c *Consumer) Concurrently(h Handler) Callback {
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		a, ran := c.call(ctx, h, msgs, false)
		if ran && a.err == nil {
			return rmq.ConsumeSuccess, nil
		}
		if !ran || c.draining.Load() {
			// Sent back now, a message would spend a reconsume that its
			// next owner can spare it.
			return c.hold()
		}
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok && a.delayLevel > 0 {
			cc.DelayLevelWhenNextConsume = a.delayLevel
		}
		return rmq.ConsumeRetryLater, a.err
	}
}

// Orderly adapts h for an orderly push consumer (rmq.WithConsumerOrder).
// On failure it suspends the queue (for [WithSuspend]) and redelivers the
// same message: returning ConsumeRetryLater in orderly mode would let the
// next success commit past the failed message. A message whose key another
// consumer holds is waited for in process, for a suspension spends a
// reconsume. A panic in h is recovered.
//
// A message that can never succeed — no key, an invalid key, a reused key
// with another payload — holds its queue until the client's reconsume limit,
// which for orderly consumers defaults to unlimited: set
// rmq.WithMaxReconsumeTimes so that it reaches the dead-letter queue.
func (c *Consumer) Orderly(h Handler) Callback {
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		a, ran := c.call(ctx, h, msgs, true)
		if ran && a.err == nil {
			return rmq.ConsumeSuccess, nil
		}
		if !ran || c.draining.Load() {
			// Sent back now, a message would spend a reconsume that its
			// next owner can spare it.
			return c.hold()
		}
		if oc, ok := primitive.GetOrderlyCtx(ctx); ok {
			oc.SuspendCurrentQueueTimeMillis = int(c.suspend.Milliseconds())
		}
		return rmq.SuspendCurrentQueueAMoment, a.err
	}
}

// call runs one callback's messages unless a drain has started (ran is
// false then), counted in running until it has decided, so that a drain
// waits for it but not for its hold.
func (c *Consumer) call(ctx context.Context, h Handler, exts []*primitive.MessageExt, orderly bool) (a answer, ran bool) {
	if !c.enter() {
		c.stats.Delivered.Add(int64(len(exts)))
		for _, m := range exts {
			msg := fromExt(m)
			c.decide(ctx, &msg, "", dedupe.Result{Outcome: dedupe.Canceled, Err: errDraining})
		}
		return answer{}, false
	}
	defer c.leave()
	return c.consume(ctx, h, exts, orderly), true
}

// answer is what one callback answers: nil err acknowledges the messages;
// otherwise they are retried, at delayLevel when it is set — or, during a
// drain, held until the client shuts down.
type answer struct {
	err        error
	delayLevel int
}

// consume processes one callback's messages and sums their verdicts up in
// the callback's answer.
func (c *Consumer) consume(ctx context.Context, h Handler, exts []*primitive.MessageExt, orderly bool) answer {
	msgs := make([]Message, len(exts))
	for i, m := range exts {
		msgs[i] = fromExt(m)
	}
	run := func(ctx context.Context, i int) error {
		ctx, done := c.stoppable(ctx)
		defer done()
		return h(ctx, exts[i])
	}
	var (
		a       answer
		retried []error // of the messages retried or held
		busy    bool
		busyFor time.Duration // the longest remaining lease of a busy key
	)
	// A suspension spends a reconsume too: orderly consumers always wait.
	for _, v := range c.process(ctx, msgs, run, Waiting{Always: orderly}) {
		if v.Action == Ack {
			continue
		}
		retried = append(retried, v.Err)
		if v.Outcome == dedupe.Busy {
			busy, busyFor = true, max(busyFor, v.wait)
		}
	}
	if len(retried) > 0 {
		a.err = errors.Join(retried...)
		if busy {
			// Not before the holder's lease ends: a redelivery sooner would
			// find the key busy again and spend another reconsume.
			a.delayLevel = c.levelFor(busyFor)
		}
	}
	return a
}

// PanicError is a recovered handler panic.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("consumer: handler panicked: %v", e.Value) }

// safeRun runs run(ctx, i), a panic recovered as a [PanicError].
func safeRun(ctx context.Context, run func(context.Context, int) error, i int) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return run(ctx, i)
}
