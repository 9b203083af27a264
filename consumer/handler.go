package consumer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
)

// Handler processes one message. A nil error acknowledges it; any error
// asks for a redelivery.
type Handler func(ctx context.Context, msg *primitive.MessageExt) error

// Middleware wraps a Handler.
type Middleware func(Handler) Handler

// Callback is the function a rocketmq.PushConsumer subscribes with.
type Callback = func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)

// Concurrently adapts h for a concurrently consuming push consumer. Messages
// of a batch are handled in order; if any fails the batch is retried later
// (messages already completed are suppressed on redelivery). A panic in h is
// recovered and treated as a failure.
//
// A message deferred because another consumer holds its key
// ([dedupe.ErrInFlight]) is retried two delay levels sooner than the
// broker's default (1s, 5s, 10s, 30s, … instead of 10s, 30s, 1m, …): the
// holder usually finishes within a second, and the back-off still grows.
func Concurrently(h Handler) Callback {
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		i, err := handleAll(ctx, h, msgs)
		if err == nil {
			return rmq.ConsumeSuccess, nil
		}
		if errors.Is(err, dedupe.ErrInFlight) {
			retrySooner(ctx, msgs[i].ReconsumeTimes)
		}
		return rmq.ConsumeRetryLater, err
	}
}

// retrySooner has a concurrently consumed batch that failed because a key
// was in flight redelivered two delay levels sooner than the broker's
// default for a message reconsumed reconsumed times.
func retrySooner(ctx context.Context, reconsumed int32) {
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
		cc.DelayLevelWhenNextConsume = min(1+int(reconsumed), maxDelayLevel)
	}
}

// MinOrderlySuspend is the shortest queue suspension [Orderly] applies.
const MinOrderlySuspend = 100 * time.Millisecond

// maxDelayLevel is the last of the broker's default 18 delay levels (2h).
const maxDelayLevel = 18

// Orderly adapts h for an orderly push consumer (consumer.WithConsumerOrder).
// On failure it suspends the queue for suspend (at least
// [MinOrderlySuspend]) and redelivers the same message: returning
// ConsumeRetryLater in orderly mode would let the next success commit past
// the failed message. A panic in h is recovered.
//
// A message that can never succeed — no key, an invalid key, a reused key
// with another payload — holds its queue until the client's reconsume limit,
// which for orderly consumers defaults to unlimited: set
// consumer.WithMaxReconsumeTimes so that it reaches the dead-letter queue.
func Orderly(h Handler, suspend time.Duration) Callback {
	// A zero suspension would retry at once, in a tight loop against a
	// failing store.
	suspend = max(suspend, MinOrderlySuspend)
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		if _, err := handleAll(ctx, h, msgs); err != nil {
			if oc, ok := primitive.GetOrderlyCtx(ctx); ok {
				oc.SuspendCurrentQueueTimeMillis = int(suspend.Milliseconds())
			}
			return rmq.SuspendCurrentQueueAMoment, err
		}
		return rmq.ConsumeSuccess, nil
	}
}

// handleAll handles msgs in order until one fails, and returns its index.
func handleAll(ctx context.Context, h Handler, msgs []*primitive.MessageExt) (int, error) {
	for i, m := range msgs {
		if err := safeCall(ctx, h, m); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// ErrPanic wraps a recovered handler panic.
type ErrPanic struct {
	Value any
	Stack []byte
}

func (e *ErrPanic) Error() string { return fmt.Sprintf("consumer: handler panicked: %v", e.Value) }

func safeCall(ctx context.Context, h Handler, m *primitive.MessageExt) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &ErrPanic{Value: v, Stack: debug.Stack()}
		}
	}()
	return h(ctx, m)
}
