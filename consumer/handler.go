package consumer

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
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
func Concurrently(h Handler) Callback {
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		if err := handleAll(ctx, h, msgs); err != nil {
			return rmq.ConsumeRetryLater, err
		}
		return rmq.ConsumeSuccess, nil
	}
}

// Orderly adapts h for an orderly push consumer (consumer.WithConsumerOrder).
// On failure it suspends the queue for suspend and redelivers the same
// message: returning ConsumeRetryLater in orderly mode would let the next
// success commit past the failed message. A panic in h is recovered.
func Orderly(h Handler, suspend time.Duration) Callback {
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		if err := handleAll(ctx, h, msgs); err != nil {
			if oc, ok := primitive.GetOrderlyCtx(ctx); ok {
				oc.SuspendCurrentQueueTimeMillis = int(suspend.Milliseconds())
			}
			return rmq.SuspendCurrentQueueAMoment, err
		}
		return rmq.ConsumeSuccess, nil
	}
}

func handleAll(ctx context.Context, h Handler, msgs []*primitive.MessageExt) error {
	for _, m := range msgs {
		if err := safeCall(ctx, h, m); err != nil {
			return err
		}
	}
	return nil
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
