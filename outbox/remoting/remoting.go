// Package remoting ships an outbox's rows through RocketMQ's remoting
// client, github.com/apache/rocketmq-client-go/v2, by way of package
// producer/remoting's Producer: [Sender] is the [outbox.Sender] a relay
// takes.
//
//	s, err := remoting.New(p) // p: a *producer/remoting.Producer
//	...
//	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
//
// Every row carries the key it was stamped with when it was added, which
// the producer keeps. A relay ships rows in batches through Sender (see
// [outbox.BatchSender]). Rows with an ordering key travel with it as their
// sharding key: for an orderly topic, build the client's producer with
// producer.WithQueueSelector(producer.NewHashQueueSelector()) so that a
// key's rows go to one queue.
package remoting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/outbox"
	premoting "github.com/idemq/idemq/producer/remoting"
)

// Sender is an [outbox.BatchSender] over a producer/remoting Producer. It
// does not start or shut down the producer.
type Sender struct{ p *premoting.Producer }

var _ outbox.BatchSender = (*Sender)(nil)

// New returns a Sender shipping through p.
func New(p *premoting.Producer) (*Sender, error) {
	if p == nil {
		return nil, errors.New("outbox/remoting: nil producer")
	}
	return &Sender{p: p}, nil
}

// Send ships m with SendSync. A send stored by the broker but answered with
// a status other than SEND_OK (a flush or replica timeout) is an error, and
// the row ships again, with its key. The broker's MESSAGE_ILLEGAL answer
// (code 13: a body over its maxMessageSize, a property too long) wraps
// [outbox.ErrRefused], and the relay parks the row.
func (s *Sender) Send(ctx context.Context, m *outbox.Message) error {
	return s.send(ctx, m.Topic, message(m))
}

// SendBatch ships msgs as one batch with SendSync, which puts them in the
// queue of their shared ordering key (their sharding key), and answers as
// Send does, for the batch: the broker refuses it whole (MESSAGE_ILLEGAL)
// when one message, or their sum, is over its limits.
//
// A message whose properties exceed the broker's limit (32 KiB) is refused
// here, with its batch, before it is sent: in a batch its properties'
// length travels in a field the broker reads as signed 16 bits, and the
// 4.9 broker left such a batch with a sharding key unanswered (for 30 s,
// in TestBatchWithPoisonRow) where it refuses the message alone.
func (s *Sender) SendBatch(ctx context.Context, msgs []*outbox.Message) error {
	if len(msgs) == 0 {
		return errors.New("outbox/remoting: empty batch")
	}
	ms := make([]*primitive.Message, len(msgs))
	for i, m := range msgs {
		ms[i] = message(m)
		if n := len(ms[i].MarshallProperties()); n > math.MaxInt16 {
			return fmt.Errorf("%w: outbox/remoting: message %s: properties of %d bytes, limit %d", outbox.ErrRefused, m.Key(), n, math.MaxInt16)
		}
	}
	return s.send(ctx, msgs[0].Topic, ms...)
}

// message is m as the client sends it.
func message(m *outbox.Message) *primitive.Message {
	msg := primitive.NewMessage(m.Topic, m.Body)
	if m.Tags != "" {
		msg.WithTag(m.Tags)
	}
	for name, v := range m.Properties {
		msg.WithProperty(name, v)
	}
	msg.WithKeys(m.Keys)
	if m.OrderingKey != "" {
		msg.WithShardingKey(m.OrderingKey)
	}
	return msg
}

// send ships msgs with SendSync and sorts its answer.
func (s *Sender) send(ctx context.Context, topic string, msgs ...*primitive.Message) error {
	res, err := s.p.SendSync(ctx, msgs...)
	switch {
	case err != nil && refused(err):
		return fmt.Errorf("%w: %w", outbox.ErrRefused, err)
	case err != nil:
		return err
	case res.Status != primitive.SendOK:
		return fmt.Errorf("outbox/remoting: send to %s: status %d", topic, res.Status)
	}
	return nil
}

// refused reports the broker's MESSAGE_ILLEGAL answer, which the client
// hands back as text only: "CODE: 13, DESC: ...".
func refused(err error) bool { return strings.Contains(err.Error(), "CODE: 13,") }
