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
// the producer keeps. Rows with an ordering key travel with it as their
// sharding key: for an orderly topic, build the client's producer with
// producer.WithQueueSelector(producer.NewHashQueueSelector()) so that a
// key's rows go to one queue.
package remoting

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/outbox"
	premoting "github.com/idemq/idemq/producer/remoting"
)

// Sender is an [outbox.Sender] over a producer/remoting Producer. It does
// not start or shut down the producer.
type Sender struct{ p *premoting.Producer }

var _ outbox.Sender = (*Sender)(nil)

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
	res, err := s.p.SendSync(ctx, msg)
	switch {
	case err != nil && refused(err):
		return fmt.Errorf("%w: %w", outbox.ErrRefused, err)
	case err != nil:
		return err
	case res.Status != primitive.SendOK:
		return fmt.Errorf("outbox/remoting: send to %s: status %d", m.Topic, res.Status)
	}
	return nil
}

// refused reports the broker's MESSAGE_ILLEGAL answer, which the client
// hands back as text only: "CODE: 13, DESC: ...".
func refused(err error) bool { return strings.Contains(err.Error(), "CODE: 13,") }
