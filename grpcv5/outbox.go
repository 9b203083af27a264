package grpcv5

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	golang "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/outbox"
)

// OutboxSender ships an outbox's rows through a golang.Producer: it is the
// [outbox.Sender] a relay takes.
//
//	s, err := grpcv5.NewOutboxSender(p) // p: a golang.Producer, started
//	...
//	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
//
// Every row carries the key it was stamped with when it was added (in its
// properties and its Keys), so the sender stamps nothing and needs no key
// source. A row's ordering key travels as its message group, which a FIFO
// topic keeps in order. It does not start or stop the producer.
//
// Once the program installs an OpenTelemetry SDK (otel.SetTracerProvider),
// each send has a span "send <topic>" under the global provider's tracer
// github.com/idemq/idemq/grpcv5, which links to the trace context the row
// carries (see [outbox.Config.TraceContext]) and is its child:
// docs/operations.md tells the rest. Without an SDK, a send builds nothing
// for it.
type OutboxSender struct{ p golang.Producer }

var _ outbox.Sender = (*OutboxSender)(nil)

// NewOutboxSender returns an OutboxSender shipping through p.
func NewOutboxSender(p golang.Producer) (*OutboxSender, error) {
	if p == nil {
		return nil, errors.New("grpcv5: nil producer")
	}
	return &OutboxSender{p: p}, nil
}

// refusals are the proxy's answers that no resend can change (codes of
// apache.rocketmq.v2.Code): an illegal topic, tag, key, message group,
// property key or delivery time, and a body or properties too large.
var refusals = map[int32]bool{
	40002: true, 40004: true, 40005: true, 40006: true, 40007: true, 40012: true,
	41301: true, 43101: true,
}

// Send ships m with Send. An answer in which the proxy refuses m for good,
// and the client's own refusal of a body over the proxy's limit, wrap
// [outbox.ErrRefused], and the relay parks the row.
func (s *OutboxSender) Send(ctx context.Context, m *outbox.Message) error {
	if !tracectx.Tracing() {
		_, err := s.send(ctx, m, nil)
		return err
	}
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	ctx, span := tracectx.StartSend(ctx, "github.com/idemq/idemq/grpcv5", "", m.Topic, []tracectx.Message{{
		Get:  func(name string) string { return props[name] },
		Set:  func(name, v string) { props[name] = v },
		Keys: m.Keys, Tag: m.Tags, BodySize: len(m.Body), Ordered: m.OrderingKey != "", Group: m.OrderingKey,
	}})
	id, err := s.send(ctx, m, props)
	errType := "failed"
	if errors.Is(err, outbox.ErrRefused) {
		errType = "refused"
	}
	tracectx.EndSend(span, id, err, errType)
	return err
}

// send is Send without a span, with props in place of m's properties
// when not nil; it returns the message id the proxy answered.
func (s *OutboxSender) send(ctx context.Context, m *outbox.Message, props map[string]string) (id string, _ error) {
	if props == nil {
		props = m.Properties
	}
	msg := &golang.Message{Topic: m.Topic, Body: m.Body}
	if m.Tags != "" {
		msg.SetTag(m.Tags)
	}
	for name, v := range props {
		msg.AddProperty(name, v)
	}
	msg.SetKeys(m.Keys...)
	if m.OrderingKey != "" {
		msg.SetMessageGroup(m.OrderingKey)
	}
	receipts, err := s.p.Send(ctx, msg)
	if err == nil {
		if len(receipts) == 1 {
			id = receipts[0].MessageID
		}
		return id, nil
	}
	err = fmt.Errorf("grpcv5: send to %s: %w", m.Topic, err)
	var st *golang.ErrRpcStatus
	if errors.As(err, &st) && refusals[st.GetCode()] || strings.Contains(err.Error(), "message body size exceeds the threshold") {
		return "", fmt.Errorf("%w: %w", outbox.ErrRefused, err)
	}
	return "", err
}
