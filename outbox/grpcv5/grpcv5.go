// Package grpcv5 ships an outbox's rows through RocketMQ's 5.x gRPC
// client, github.com/apache/rocketmq-clients/golang/v5 (through a 5.x
// proxy), by way of package producer/grpcv5's Producer: [Sender] is the
// [outbox.Sender] a relay takes.
//
//	s, err := grpcv5.New(p) // p: a *producer/grpcv5.Producer
//	...
//	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
//
// Every row carries the key it was stamped with when it was added, which
// the producer keeps. A row's ordering key travels as its message group,
// which a FIFO topic keeps in order.
package grpcv5

import (
	"context"
	"errors"
	"fmt"
	"strings"

	golang "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/outbox"
	pgrpcv5 "github.com/idemq/idemq/producer/grpcv5"
)

// Sender is an [outbox.Sender] over a producer/grpcv5 Producer. It does not
// start or stop the producer.
type Sender struct{ p *pgrpcv5.Producer }

var _ outbox.Sender = (*Sender)(nil)

// New returns a Sender shipping through p.
func New(p *pgrpcv5.Producer) (*Sender, error) {
	if p == nil {
		return nil, errors.New("outbox/grpcv5: nil producer")
	}
	return &Sender{p: p}, nil
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
func (s *Sender) Send(ctx context.Context, m *outbox.Message) error {
	msg := &golang.Message{Topic: m.Topic, Body: m.Body}
	if m.Tags != "" {
		msg.SetTag(m.Tags)
	}
	for name, v := range m.Properties {
		msg.AddProperty(name, v)
	}
	msg.SetKeys(m.Keys...)
	if m.OrderingKey != "" {
		msg.SetMessageGroup(m.OrderingKey)
	}
	_, err := s.p.Send(ctx, msg)
	if err == nil {
		return nil
	}
	var st *golang.ErrRpcStatus
	if errors.As(err, &st) && refusals[st.GetCode()] || strings.Contains(err.Error(), "message body size exceeds the threshold") {
		return fmt.Errorf("%w: %w", outbox.ErrRefused, err)
	}
	return err
}
