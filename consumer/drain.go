package consumer

import (
	"context"
	"errors"
	"fmt"

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
//     (pc keeps pulling until step 3, and what it pulls is held, so a
//     Client needs nothing but Shutdown);
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

// stoppable returns the context a handler runs with: ctx, also cancelled
// when a drain runs out of time, and a function to call once the handler
// has returned. Only the handler's context is: the store's calls keep the
// client's, which rocketmq-client-go never cancels, for a database driver
// watches a cancellable context with a goroutine of its own per statement
// (go-sql-driver/mysql: some 40 µs a statement here).
func (c *Consumer) stoppable(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(c.stop, func() { cancel(errDrainTimedOut) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}

// errDrainTimedOut is why a handler's context ends when a drain runs out of
// time.
var errDrainTimedOut = errors.New("consumer: drain ran out of time while the handler ran")
