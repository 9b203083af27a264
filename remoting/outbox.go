package remoting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/idemq/idemq/internal/rmqcall"
	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// OutboxSender ships an outbox's rows through a rocketmq.Producer: it is the
// [outbox.BatchSender] a relay takes.
//
//	s, err := remoting.NewOutboxSender(p) // p: a rocketmq.Producer, started
//	...
//	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
//
// Every row carries the key it was stamped with when it was added (in its
// properties and its Keys), so the sender stamps nothing and needs no key
// source. A relay ships rows in batches (see [outbox.BatchSender]). Rows
// with an ordering key travel with it as their sharding key: for an orderly
// topic, build the client's producer with
// producer.WithQueueSelector(producer.NewHashQueueSelector()) so that a
// key's rows go to one queue. It does not start or shut down the producer.
//
// Once the program installs an OpenTelemetry SDK (otel.SetTracerProvider),
// each send, of a row or of a batch, has a span "send <topic>" under the
// global provider's tracer github.com/idemq/idemq/remoting, which links
// to the trace context each row carries (see [outbox.Config.TraceContext])
// and is its child when the rows carry one only: docs/operations.md tells
// the rest. Without an SDK, a send builds nothing for it.
type OutboxSender struct{ p rocketmq.Producer }

var _ outbox.BatchSender = (*OutboxSender)(nil)

// NewOutboxSender returns an OutboxSender shipping through p.
func NewOutboxSender(p rocketmq.Producer) (*OutboxSender, error) {
	if p == nil {
		return nil, errors.New("remoting: nil producer")
	}
	return &OutboxSender{p: p}, nil
}

// Send ships m with SendSync. A topic RocketMQ refuses (a '.', which the
// outbox takes for other brokers) wraps [outbox.ErrRefused] before the
// wire. A send stored by the broker but answered with
// a status other than SEND_OK (a flush or replica timeout) is an error, and
// the row ships again, with its key. The broker's MESSAGE_ILLEGAL answer
// (code 13: a body over its maxMessageSize, a property too long) wraps
// [outbox.ErrRefused], and the relay parks the row.
func (s *OutboxSender) Send(ctx context.Context, m *outbox.Message) error {
	return s.send(ctx, m.Topic, rowMessage(m))
}

// SendBatch ships msgs as one batch with SendSync, which puts them in the
// queue of their shared ordering key (their sharding key), and answers as
// Send does, for the batch: the broker refuses it whole (MESSAGE_ILLEGAL)
// when one message, or their sum, is over its limits.
//
// A message of several whose properties exceed the broker's limit (32
// KiB), the trace context the send adds included, is refused here, with
// its batch, before it is sent: in a batch its properties' length travels
// in a field the broker reads as signed 16 bits, and the 4.9 broker left
// such a batch with a sharding key unanswered (for 30 s, in
// TestBatchWithPoisonRow) where it refuses the message alone.
func (s *OutboxSender) SendBatch(ctx context.Context, msgs []*outbox.Message) error {
	if len(msgs) == 0 {
		return errors.New("remoting: empty batch")
	}
	ms := make([]*primitive.Message, len(msgs))
	for i, m := range msgs {
		ms[i] = rowMessage(m)
	}
	return s.send(ctx, msgs[0].Topic, ms...)
}

// rowMessage is m as the client sends it.
func rowMessage(m *outbox.Message) *primitive.Message {
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

// send ships msgs with SendSync, as one batch in their sharding key's
// queue when there are several (see batched), and sorts its answer, under
// a span when tracing.
func (s *OutboxSender) send(ctx context.Context, topic string, msgs ...*primitive.Message) error {
	if !tracectx.Tracing() {
		_, err := s.sendSync(ctx, topic, msgs)
		return err
	}
	ms := make([]tracectx.Message, len(msgs))
	for i, m := range msgs {
		ms[i] = tracectx.Message{Get: m.GetProperty, Set: m.WithProperty, Keys: strings.Fields(m.GetKeys()), Tag: m.GetTags(),
			BodySize: len(m.Body), Ordered: m.GetShardingKey() != ""}
	}
	ctx, span := tracectx.StartSend(ctx, "github.com/idemq/idemq/remoting", "", topic, ms)
	id, err := s.sendSync(ctx, topic, msgs)
	errType := "failed"
	if errors.Is(err, outbox.ErrRefused) {
		errType = "refused"
	}
	tracectx.EndSend(span, id, err, errType)
	return err
}

// sendSync is send without a span; it returns the message id of a message
// sent alone.
func (s *OutboxSender) sendSync(ctx context.Context, topic string, msgs []*primitive.Message) (id string, _ error) {
	if err := rmqcall.CheckTopic(topic); err != nil {
		return "", fmt.Errorf("%w: remoting: %w", outbox.ErrRefused, err)
	}
	for i := 0; len(msgs) > 1 && i < len(msgs); i++ { // see SendBatch
		if n := len(msgs[i].MarshallProperties()); n > math.MaxInt16 {
			return "", fmt.Errorf("%w: remoting: message %s: properties of %d bytes, limit %d", outbox.ErrRefused, msgs[i].GetProperty(msgkey.Property), n, math.MaxInt16)
		}
	}
	res, err := s.p.SendSync(ctx, batched(msgs)...)
	if err != nil {
		err = fmt.Errorf("remoting: send to %s: %w", topic, err)
	}
	switch {
	case err != nil && refused(err):
		return "", fmt.Errorf("%w: %w", outbox.ErrRefused, err)
	case err != nil:
		return "", err
	case res.Status != primitive.SendOK:
		return "", fmt.Errorf("remoting: send to %s: status %d", topic, res.Status)
	case len(msgs) == 1:
		return res.MsgID, nil
	}
	return "", nil
}

// refused reports the broker's MESSAGE_ILLEGAL answer, which the client
// hands back as text only: "CODE: 13, DESC: ...".
func refused(err error) bool { return strings.Contains(err.Error(), "CODE: 13,") }
