// Package producer stamps every RocketMQ message with an idempotency key
// before it is first sent.
//
// The key is generated once per message where it is sent (a snowflake ID by
// default), stored in the [msgkey.Property] user property and added to the
// message Keys so that the broker indexes it. The client's internal retries
// and a caller's resend of the same *primitive.Message keep it, so a
// consumer using package consumer applies the message's effect once. A key
// the caller set before sending (a business key such as an order number) is
// kept.
package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/msgkey"
	// Routes the client's logs to slog at warn (see its doc).
	_ "github.com/idemq/idemq/rmqlog"
)

// Producer wraps a rocketmq.Producer; it stamps keys and then sends. It does
// not start or shut down the wrapped producer.
type Producer struct {
	p    rocketmq.Producer
	keys msgkey.Source
}

// New returns a Producer sending through p with keys from keys.
func New(p rocketmq.Producer, keys msgkey.Source) (*Producer, error) {
	if p == nil || keys == nil {
		return nil, errors.New("producer: nil producer or key source")
	}
	return &Producer{p: p, keys: keys}, nil
}

// Stamp gives every message without a key a fresh one and makes sure each
// key is also among the message's Keys. It is idempotent: stamping a message
// again changes nothing. It fails without sending anything if a key is
// invalid ([msgkey.ErrInvalid]) or the key source fails; messages stamped
// before the failure keep their keys.
func (p *Producer) Stamp(ctx context.Context, msgs ...*primitive.Message) error {
	return stamp(ctx, p.keys, msgs)
}

// stamp is Stamp with keys from keys, for every kind of producer.
func stamp(ctx context.Context, keys msgkey.Source, msgs []*primitive.Message) error {
	if len(msgs) == 0 {
		return errors.New("producer: no messages")
	}
	for _, m := range msgs {
		if m == nil {
			return errors.New("producer: nil message")
		}
		if _, err := msgkey.Stamp(ctx, message{m}, keys.NextKey); err != nil {
			return fmt.Errorf("producer: topic %s: %w", m.Topic, err)
		}
	}
	return nil
}

// message fits a *primitive.Message to msgkey.Stamp.
type message struct{ *primitive.Message }

func (m message) SetProperty(name, value string) { m.WithProperty(name, value) }
func (m message) Keys() []string                 { return strings.Fields(m.GetKeys()) }
func (m message) SetKeys(keys []string)          { m.WithKeys(keys) }

// SendSync stamps msgs and sends them. The client retries a failed attempt
// internally with the same key; a caller that sends the same messages again
// after an error keeps their keys too.
func (p *Producer) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	if err := p.Stamp(ctx, msgs...); err != nil {
		return nil, err
	}
	res, err := p.p.SendSync(ctx, msgs...)
	if err != nil {
		return res, fmt.Errorf("producer: send to %s: %w", msgs[0].Topic, err)
	}
	return res, nil
}

// SendAsync stamps msgs and sends them without waiting. done is called at
// most once, and not at all when SendAsync returns an error. (After a failed
// send, rocketmq-client-go v2.1.2 called its callback with the error and then
// went on to a nil dereference that its own recover caught; the guard here
// keeps a second call from ever reaching done, whatever the client version.)
func (p *Producer) SendAsync(ctx context.Context, done func(context.Context, *primitive.SendResult, error), msgs ...*primitive.Message) error {
	if err := p.Stamp(ctx, msgs...); err != nil {
		return err
	}
	var once sync.Once
	return p.p.SendAsync(ctx, func(ctx context.Context, res *primitive.SendResult, err error) {
		once.Do(func() { done(ctx, res, err) })
	}, msgs...)
}

// SendOneWay stamps msgs and sends them without waiting for the broker.
func (p *Producer) SendOneWay(ctx context.Context, msgs ...*primitive.Message) error {
	if err := p.Stamp(ctx, msgs...); err != nil {
		return err
	}
	return p.p.SendOneWay(ctx, msgs...)
}
