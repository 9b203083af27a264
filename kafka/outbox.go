package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/outbox"
)

// OutboxSender ships an outbox's rows through a *kgo.Client: it is the
// [outbox.BatchSender] a relay takes.
//
// A row's ordering key becomes its record's Key, so that the client's
// partitioner puts each key's rows in one partition, in the order the
// relay ships them; a row without one has no Key. Every row carries the
// key it was stamped with when it was added, and its other properties, as
// headers, so the sender stamps nothing and needs no key source. A row's
// Tags and Keys, which Kafka has no place for, are not sent.
//
// Once the program installs an OpenTelemetry SDK (otel.SetTracerProvider),
// each send has a span "send <topic>" under the global provider's tracer
// github.com/idemq/idemq/kafka, as package remoting's OutboxSender has.
// It does not close the client.
type OutboxSender struct{ cl *kgo.Client }

var _ outbox.BatchSender = (*OutboxSender)(nil)

// NewOutboxSender returns an OutboxSender shipping through cl. Keep the
// client's default idempotent producer (do not pass
// kgo.DisableIdempotentWrite), which keeps a partition's records in the
// order they were produced across the client's retries.
func NewOutboxSender(cl *kgo.Client) (*OutboxSender, error) {
	if cl == nil {
		return nil, errors.New("kafka: nil client")
	}
	return &OutboxSender{cl: cl}, nil
}

// Send produces m and waits until the broker has stored it. A record the
// client or the broker refuses for good (too large, invalid, a topic name
// Kafka refuses) wraps [outbox.ErrRefused], and the relay parks the row;
// other errors are retried by the relay.
func (s *OutboxSender) Send(ctx context.Context, m *outbox.Message) error {
	return s.send(ctx, m.Topic, []*kgo.Record{rowRecord(m)})
}

// SendBatch produces msgs, of one topic and one ordering key, and waits
// until the broker has stored them all; it answers as Send does for the
// batch. Kafka stores a batch's records one by one, not all or none:
// after an error the relay sends the whole batch again, and the records
// stored the first time arrive twice, with their keys, for the consumers'
// dedupe to suppress.
func (s *OutboxSender) SendBatch(ctx context.Context, msgs []*outbox.Message) error {
	if len(msgs) == 0 {
		return errors.New("kafka: empty batch")
	}
	rs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		rs[i] = rowRecord(m)
	}
	return s.send(ctx, msgs[0].Topic, rs)
}

// rowRecord is m as the client produces it.
func rowRecord(m *outbox.Message) *kgo.Record {
	r := &kgo.Record{Topic: m.Topic, Value: m.Body, Headers: make([]kgo.RecordHeader, 0, len(m.Properties))}
	if m.OrderingKey != "" {
		r.Key = []byte(m.OrderingKey)
	}
	for name, v := range m.Properties {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
	}
	return r
}

// send produces rs, under a span when tracing.
func (s *OutboxSender) send(ctx context.Context, topic string, rs []*kgo.Record) error {
	if !tracectx.Tracing() {
		_, err := s.produce(ctx, topic, rs)
		return err
	}
	ms := make([]tracectx.Message, len(rs))
	for i, r := range rs {
		h := headers{r}
		ms[i] = tracectx.Message{Get: h.GetProperty, Set: h.set, BodySize: len(r.Value), Ordered: r.Key != nil}
	}
	ctx, span := tracectx.StartSend(ctx, "github.com/idemq/idemq/kafka", "kafka", topic, ms)
	id, err := s.produce(ctx, topic, rs)
	errType := "failed"
	if errors.Is(err, outbox.ErrRefused) {
		errType = "refused"
	}
	tracectx.EndSend(span, id, err, errType)
	return err
}

// produce is send without a span; it returns the partition/offset of a
// record sent alone, as the consumer's message ID names it.
func (s *OutboxSender) produce(ctx context.Context, topic string, rs []*kgo.Record) (id string, _ error) {
	res := s.cl.ProduceSync(ctx, rs...)
	for _, pr := range res {
		if pr.Err == nil {
			continue
		}
		err := fmt.Errorf("kafka: produce to %s: %w", topic, pr.Err)
		if refused(pr.Err) {
			return "", fmt.Errorf("%w: %w", outbox.ErrRefused, err)
		}
		return "", err
	}
	if len(rs) == 1 {
		return recordID(rs[0]), nil
	}
	return "", nil
}

// refused reports the errors with which the client or the broker refuses a
// record for good: however often the relay retries, it fails the same way.
func refused(err error) bool {
	for _, e := range []error{
		kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTopicException,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
