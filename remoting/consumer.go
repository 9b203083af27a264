package remoting

import (
	"context"
	"errors"
	"strings"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/adapter"
)

// Concurrently returns the callback that runs h through c for a
// concurrently consuming push consumer. The messages the client delivers
// together (one by default; rmq.WithConsumeMessageBatchMaxSize for more)
// are claimed in one store round trip and completed in one, and h runs for
// each acquired message in order, even after an earlier one failed: on
// redelivery those completed are suppressed, so only what failed runs
// again. The callback answers ConsumeRetryLater if any message must be
// retried (the client resends the whole batch), else ConsumeSuccess; a
// busy key's batch comes back at the first delay level no shorter than the
// holder's remaining lease. A batch whose claims find the store down waits
// in the callback until the store answers, up to
// consumer.WithStoreDownWait (10 minutes by default, under the push
// consumer's ConsumeTimeout of 15, past which the client sends a message in
// a callback back on its own), and on a message's last reconsume for as
// long as the store is down.
func Concurrently(c *consumer.Consumer, h consumer.Handler) func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
	return func(ctx context.Context, exts ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		msgs, vs := messages(exts)
		a := sum(adapter.Process(ctx, c, msgs, h, adapter.Waiting{}, vs))
		if a.err == nil {
			return rmq.ConsumeSuccess, nil
		}
		if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok && !a.held && a.level > 0 {
			cc.DelayLevelWhenNextConsume = a.level
		}
		return rmq.ConsumeRetryLater, a.err
	}
}

// Orderly returns the callback that runs h through c for an orderly push
// consumer (rmq.WithConsumerOrder). On failure it suspends the queue (for
// [WithSuspend]) and redelivers the same message: returning
// ConsumeRetryLater in orderly mode would let the next success commit past
// the failed message. A busy key, and a store that is down, are always
// waited for in process, for a suspension spends a reconsume too.
//
// A message that can never succeed — no key, an invalid key, a reused key
// with another payload — holds its queue until the client's reconsume limit,
// which for orderly consumers defaults to unlimited: set
// rmq.WithMaxReconsumeTimes so that it reaches the dead-letter queue.
//
// Allocate with [HandBack], or the queues that a group change moves wait
// some 60 s for the broker's lock to expire.
func Orderly(c *consumer.Consumer, h consumer.Handler, opts ...Option) func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
	o := options{suspend: time.Second}
	for _, opt := range opts {
		opt.apply(&o)
	}
	suspend := int(o.suspend.Milliseconds())
	return func(ctx context.Context, exts ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
		msgs, vs := messages(exts)
		a := sum(adapter.Process(ctx, c, msgs, h, adapter.Waiting{Always: true}, vs))
		switch {
		case a.err == nil:
			return rmq.ConsumeSuccess, nil
		case a.held:
			// Answered once the client has shut down: nothing to suspend.
			return rmq.ConsumeRetryLater, a.err
		}
		if oc, ok := primitive.GetOrderlyCtx(ctx); ok {
			oc.SuspendCurrentQueueTimeMillis = suspend
		}
		return rmq.SuspendCurrentQueueAMoment, a.err
	}
}

// Option configures [Orderly].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct{ suspend time.Duration }

// minSuspend is the shortest queue suspension [Orderly] applies: a zero
// suspension would retry at once, in a tight loop against a failing store.
const minSuspend = 100 * time.Millisecond

// WithSuspend sets how long [Orderly] suspends a queue whose message
// failed, at least 100ms (a zero suspension would retry at once, in a
// tight loop against a failing store). Default 1s.
func WithSuspend(d time.Duration) Option {
	return optionFunc(func(o *options) { o.suspend = max(d, minSuspend) })
}

// Drain stops pc (a rocketmq.PushConsumer), whose callbacks run through
// c, instead of pc.Shutdown,
// which does not wait for running handlers: no callback starts a handler
// from now on (what pc delivers meanwhile is held), the running handlers
// finish and record as long as ctx allows (then their contexts are
// cancelled), pc shuts down, persisting the offsets of what was
// acknowledged, and only then do the held callbacks answer: their messages
// go to the queue's next owner without spending a reconsume. Call it once,
// on SIGTERM.
func Drain(ctx context.Context, c *consumer.Consumer, pc interface{ Shutdown() error }) error {
	return adapter.Drain(ctx, c, pc.Shutdown)
}

// UniqKey is the client-generated UNIQ_KEY property, a fallback key for
// consumer.WithKeyFallback. The client sets it on a message value the first
// time it is sent, so it survives retries and a resend of the same value,
// but not a message rebuilt for a resend, and messages sent in a batch get
// none: a fallback, not a substitute for a key stamped by [Producer].
func UniqKey(m *consumer.Message) string {
	return m.Properties[primitive.PropertyUniqueClientMessageIdKeyIndex]
}

// messages converts a callback's messages, and makes room for their
// verdicts: for one message, a push consumer's default, in one allocation.
func messages(exts []*primitive.MessageExt) ([]consumer.Message, []adapter.Verdict) {
	var (
		msgs []consumer.Message
		vs   []adapter.Verdict
	)
	if len(exts) == 1 {
		one := new(struct {
			msg [1]consumer.Message
			v   [1]adapter.Verdict
		})
		msgs, vs = one.msg[:], one.v[:]
	} else {
		msgs, vs = make([]consumer.Message, len(exts)), make([]adapter.Verdict, len(exts))
	}
	for i, m := range exts {
		props := m.GetProperties() // a copy
		msgs[i] = consumer.Message{
			ID:         m.MsgId,
			Topic:      m.Topic,
			Tag:        props[primitive.PropertyTags],
			Keys:       strings.Fields(props[primitive.PropertyKeys]),
			Properties: props,
			Body:       m.Body,
			Reconsumed: m.ReconsumeTimes,
			Raw:        m,
		}
	}
	return msgs, vs
}

// answer is what one callback's messages sum up to: err, nil when all are
// acknowledged, joins the errors of the others; held says a drain holds
// them; level is the highest delay level of a busy key.
type answer struct {
	err   error
	held  bool
	level int
}

func sum(vs []adapter.Verdict) answer {
	var (
		a    answer
		errs []error
	)
	for _, v := range vs {
		switch {
		case v.Action == adapter.Ack:
			continue
		case errors.Is(v.Err, adapter.ErrDraining):
			a.held = true
		case v.Outcome == dedupe.Busy:
			a.level = max(a.level, v.Level)
		}
		errs = append(errs, v.Err)
	}
	a.err = errors.Join(errs...)
	return a
}
