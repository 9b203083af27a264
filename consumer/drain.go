package consumer

import (
	"context"
	"errors"
	"fmt"
)

// drainClient stops a client without cutting a running handler off between its
// effect and the record of it — the gap through which a client that stops
// without waiting for its handlers doubles effects on every rolling deploy:
//
//  1. no call of process starts a handler from now on: messages
//     delivered meanwhile are held, as are messages waiting for a busy key
//     (the client may keep delivering until step 4: what it delivers is
//     held);
//  2. the handlers under way finish, and their keys are recorded, as long
//     as ctx allows; when ctx ends first, their contexts are cancelled
//     ([dedupe.Guard.Interrupt], in both modes) and no handler starts any
//     more;
//  3. the completions of the handlers that finished, which the guard
//     answered before recording them (at most 64), are recorded, as long as
//     ctx allows;
//  4. stop stops the client (a remoting push consumer's Shutdown, which
//     persists the offsets of what was acknowledged);
//  5. the held calls return, their messages unacknowledged, after the
//     client stopped acting on answers: they go to the queue's next owner
//     without spending a reconsume.
//
// A client adapter calls it (through internal/adapter's Drain; see package
// remoting's Drain), once.
// Its error says whether handlers were still running when ctx ended, and
// what stop answered.
func (c *Consumer) drainClient(ctx context.Context, stop func() error) error {
	if !c.draining.CompareAndSwap(false, true) {
		return errors.New("consumer: drain: already drained")
	}
	close(c.drain)
	err := c.awaitIdle(ctx)
	if err != nil {
		c.guard().Interrupt(errDrainTimedOut)
	}
	// The completions the guard answered before recording them are
	// recorded before the client persists the offsets of their messages.
	if ferr := c.plain.Flush(ctx); ferr != nil {
		err = errors.Join(err, fmt.Errorf("consumer: drain: %w", ferr))
	}
	if serr := stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("consumer: drain: stop the client: %w", serr))
	}
	close(c.shut)
	return err
}

// awaitIdle waits until no call of process runs a handler, or ctx ends.
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

// enter counts a call of process in, unless draining has started.
func (c *Consumer) enter() bool {
	c.running.Add(1)
	if c.draining.Load() {
		c.leave()
		return false
	}
	return true
}

// leave counts a call of process out, waking a drain that waits for the
// last.
func (c *Consumer) leave() {
	if c.running.Add(-1) == 0 && c.draining.Load() {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// errDrainTimedOut is why a handler's context ends when a drain runs out of
// time.
var errDrainTimedOut = errors.New("consumer: drain ran out of time while the handler ran")
