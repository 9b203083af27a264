package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
)

// Client is the push consumer that [Consumer.Drain] stops; a
// rocketmq.PushConsumer is one.
type Client interface {
	// Shutdown persists the consumed offsets and stops the client.
	Shutdown() error
}

// Drain stops pc without cutting a running handler off between its effect
// and the record of it — the gap through which a plain Shutdown, which
// does not wait for handlers, doubles effects on every rolling deploy:
//
//  1. no callback of this Consumer starts a handler from now on: messages
//     delivered meanwhile are held, as are messages waiting for a busy key
//     (pc keeps pulling until step 3: its Suspend races with its own
//     rebalancing in rocketmq-client-go v2.1.2, and what it pulls is held);
//  2. the handlers under way finish, and their keys are recorded, as long
//     as ctx allows; when ctx ends first, their contexts are cancelled;
//  3. pc shuts down, which persists the offsets of what was acknowledged;
//  4. the held callbacks return, unacknowledged, after the client stopped
//     acting on answers: their messages go to the queue's next owner
//     without spending a reconsume.
//
// Call it once, on SIGTERM, instead of pc.Shutdown. Its error says whether
// handlers were still running when ctx ended, and what Shutdown answered.
func (c *Consumer) Drain(ctx context.Context, pc Client) error {
	if !c.draining.CompareAndSwap(false, true) {
		return errors.New("consumer: drain: already drained")
	}
	close(c.drain)
	err := c.awaitIdle(ctx)
	if err != nil {
		c.cancelStop()
	}
	if serr := pc.Shutdown(); serr != nil {
		err = errors.Join(err, fmt.Errorf("consumer: drain: shut down the push consumer: %w", serr))
	}
	close(c.shut)
	c.cancelStop()
	return err
}

// awaitIdle waits until no callback runs a handler, or ctx ends.
func (c *Consumer) awaitIdle(ctx context.Context) error {
	for c.running.Load() > 0 {
		select {
		case <-c.idle:
		case <-ctx.Done():
			return fmt.Errorf("consumer: drain: %d callbacks still running handlers: %w", c.running.Load(), context.Cause(ctx))
		}
	}
	return nil
}

// enter counts a callback in, unless draining has started.
func (c *Consumer) enter() bool {
	c.running.Add(1)
	if c.draining.Load() {
		c.leave()
		return false
	}
	return true
}

// leave counts a callback out, waking a drain that waits for the last.
func (c *Consumer) leave() {
	if c.running.Add(-1) == 0 && c.draining.Load() {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// hold answers for messages left to the queue's next owner: it returns once
// the client has shut down and no longer acts on the answer.
func (c *Consumer) hold() (rmq.ConsumeResult, error) {
	<-c.shut
	return rmq.ConsumeRetryLater, errDraining
}

// stopContext is the context a callback's handlers run with: the values of
// the client's context, which rocketmq-client-go never cancels, and the
// cancellation of the Consumer's stop, which a drain out of time cancels.
// It costs no goroutine: a context derived from it registers with stop.
type stopContext struct {
	context.Context
	stop context.Context
}

func (s stopContext) Deadline() (deadline time.Time, ok bool) { return s.stop.Deadline() }
func (s stopContext) Done() <-chan struct{}                   { return s.stop.Done() }
func (s stopContext) Err() error                              { return s.stop.Err() }

func (s stopContext) Value(key any) any {
	if v := s.Context.Value(key); v != nil {
		return v
	}
	// How context.WithCancel finds stop's cancellation to register with.
	return s.stop.Value(key)
}

// callContext returns the context for the handlers of a callback given
// ctx, and a function to call once they are done.
func (c *Consumer) callContext(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil {
		return stopContext{Context: ctx, stop: c.stop}, func() {}
	}
	// A cancellable context (not the client's): end it with stop too.
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(c.stop, cancel)
	return ctx, func() { unhook(); cancel() }
}
