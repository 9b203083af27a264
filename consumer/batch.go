package consumer

import (
	"context"
	"errors"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/dedupe"
)

// DedupeBatch returns an adapter that turns h into the callback of a
// concurrently consuming push consumer, as Concurrently(dd(h)) does for the
// middleware dd that [Dedupe] returns with the same arguments, but dedupes a
// delivered batch (rmq.WithConsumeMessageBatchMaxSize above 1) in at most
// three store round trips instead of two per message: one claims every key,
// one completes the messages h handled, one releases those it failed (see
// [dedupe.Guard.DoBatch]; a store that is not a [dedupe.Batcher] gets one
// call per message instead).
//
// h runs for every message whose key was acquired, in order, even after an
// earlier message failed: a batch is acknowledged or retried as a whole, and
// on redelivery the messages already completed are suppressed, so only what
// failed runs again. The callback answers ConsumeRetryLater if any message
// must be retried and ConsumeSuccess otherwise. When every message to retry
// was deferred because another consumer held its key, the batch is retried
// sooner, as in [Concurrently], by the delay level of its most reconsumed
// such message. A panic in h is recovered and fails that message only.
func DedupeBatch(store dedupe.Store, group string, opts ...Option) (func(Handler) Callback, error) {
	d, err := newDeduper(store, group, opts)
	if err != nil {
		return nil, err
	}
	return func(h Handler) Callback {
		return func(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
			return d.consume(ctx, h, msgs)
		}
	}, nil
}

// consume handles one delivered batch.
func (d *deduper) consume(ctx context.Context, h Handler, msgs []*primitive.MessageExt) (rmq.ConsumeResult, error) {
	errs := make([]error, len(msgs))
	items := make([]dedupe.BatchItem, 0, len(msgs))
	of := make([]int, 0, len(msgs)) // the message of each item
	for i, m := range msgs {
		it, err := d.item(ctx, m)
		if err != nil {
			errs[i] = err
			continue
		}
		items = append(items, it)
		of = append(of, i)
	}
	outs, itemErrs := d.guard.DoBatch(ctx, items, func(ctx context.Context, j int) error {
		return safeCall(ctx, h, msgs[of[j]])
	})
	for j, i := range of {
		errs[i] = d.settle(ctx, items[j].Ref, outs[j], itemErrs[j])
	}

	var (
		retry      []error
		inFlight   = true
		reconsumed int32
	)
	for i, err := range errs {
		if err == nil {
			continue
		}
		retry = append(retry, err)
		if errors.Is(err, dedupe.ErrInFlight) {
			reconsumed = max(reconsumed, msgs[i].ReconsumeTimes)
		} else {
			inFlight = false
		}
	}
	if len(retry) == 0 {
		return rmq.ConsumeSuccess, nil
	}
	if inFlight {
		retrySooner(ctx, reconsumed)
	}
	return rmq.ConsumeRetryLater, errors.Join(retry...)
}
