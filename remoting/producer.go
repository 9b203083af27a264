package remoting

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/msgkey"
)

// Producer wraps a rocketmq.Producer so that every message is stamped with
// its idempotency key before its first send (see package msgkey's Stamp);
// it stamps keys and then sends. It does not start or shut down the wrapped
// producer.
type Producer struct {
	p    rocketmq.Producer
	keys msgkey.Source
}

// NewProducer returns a Producer sending through p with keys from keys.
func NewProducer(p rocketmq.Producer, keys msgkey.Source) (*Producer, error) {
	if p == nil || keys == nil {
		return nil, errors.New("remoting: nil producer or key source")
	}
	return &Producer{p: p, keys: keys}, nil
}

// Stamp gives every message without a key a fresh one and makes sure each
// key is also among the message's Keys, and puts ctx's trace context in
// its properties (traceparent, tracestate) through the OpenTelemetry
// propagator the program sets, unless it carries one. It is idempotent:
// stamping a message again changes nothing. It fails without sending anything if a key is
// invalid ([msgkey.ErrInvalid]) or the key source fails; messages stamped
// before the failure keep their keys.
func (p *Producer) Stamp(ctx context.Context, msgs ...*primitive.Message) error {
	return stamp(ctx, p.keys, msgs)
}

// stamp is Stamp with keys, for both kinds of producer.
func stamp(ctx context.Context, keys msgkey.Source, msgs []*primitive.Message) error {
	if len(msgs) == 0 {
		return errors.New("remoting: no messages")
	}
	for _, m := range msgs {
		if m == nil {
			return errors.New("remoting: nil message")
		}
		key, withKey, err := msgkey.Stamp(ctx, m, strings.Fields(m.GetKeys()), keys.NextKey)
		if err != nil {
			return fmt.Errorf("remoting: topic %s: %w", m.Topic, err)
		}
		m.WithProperty(msgkey.Property, key)
		m.WithKeys(withKey)
		tracectx.Inject(ctx, m.GetProperty, m.WithProperty)
	}
	return nil
}

// batched returns what the client is to send for msgs: msgs, or, for
// several messages of one topic and one sharding key, a batch of them that
// carries the key. The client batches several messages itself, but into a
// message with no properties, which a queue selector by sharding key
// (NewHashQueueSelector) puts in a random queue rather than the key's. Each
// message in a batch keeps its own properties and Keys.
func batched(msgs []*primitive.Message) []*primitive.Message {
	if len(msgs) < 2 || msgs[0].GetShardingKey() == "" {
		return msgs
	}
	for _, m := range msgs[1:] {
		if m.Topic != msgs[0].Topic || m.GetShardingKey() != msgs[0].GetShardingKey() {
			return msgs
		}
	}
	b := &primitive.Message{Topic: msgs[0].Topic, Queue: msgs[0].Queue, Body: rmqproducer.MarshalMessageBatch(msgs...), Batch: true}
	b.WithShardingKey(msgs[0].GetShardingKey())
	return []*primitive.Message{b}
}

// SendSync stamps msgs and sends them: several, of one topic, go as one
// batch, which the broker stores whole or not at all, in one queue (the
// sharding key's, when they share one). The client retries a failed
// attempt internally with the same keys; a caller that sends the same
// messages again after an error keeps their keys too.
func (p *Producer) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	if err := p.Stamp(ctx, msgs...); err != nil {
		return nil, err
	}
	res, err := p.p.SendSync(ctx, batched(msgs)...)
	if err != nil {
		return res, fmt.Errorf("remoting: send to %s: %w", msgs[0].Topic, err)
	}
	return res, nil
}

// SendAsync stamps msgs and sends them, as SendSync does, without waiting.
// done is called at most once, and not at all when SendAsync returns an
// error. (After a failed send, rocketmq-client-go v2.1.2 called its
// callback with the error and then went on to a nil dereference that its own
// recover caught; the guard here keeps a second call from ever reaching done,
// whatever the client version.)
func (p *Producer) SendAsync(ctx context.Context, done func(context.Context, *primitive.SendResult, error), msgs ...*primitive.Message) error {
	if err := p.Stamp(ctx, msgs...); err != nil {
		return err
	}
	var once sync.Once
	return p.p.SendAsync(ctx, func(ctx context.Context, res *primitive.SendResult, err error) {
		once.Do(func() { done(ctx, res, err) })
	}, batched(msgs)...)
}

// SendOneWay stamps msgs and sends them, as SendSync does, without waiting
// for the broker.
func (p *Producer) SendOneWay(ctx context.Context, msgs ...*primitive.Message) error {
	if err := p.Stamp(ctx, msgs...); err != nil {
		return err
	}
	return p.p.SendOneWay(ctx, batched(msgs)...)
}
