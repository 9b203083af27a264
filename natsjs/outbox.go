package natsjs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// OutboxSender ships an outbox's rows through a jetstream.JetStream: it is
// the [outbox.Sender] a relay takes.
//
//	s, err := natsjs.NewOutboxSender(js)
//	...
//	relay, err := outbox.NewRelay(ob, s, outbox.RelayConfig{})
//
// A row's topic is the subject it is published to; its properties are the
// message's headers, and the key it was stamped with when it was added is
// also its message id (Nats-Msg-Id), so that a row the relay sends again
// after a crash, within the stream's duplicate window, is dropped by the
// server. Tags and Keys, which NATS has no place for, are not sent.
//
// Order: a stream stores the messages published to it in the order it
// receives them, and a relay ships the rows of one ordering key one after
// another, each once the last is stored; so one key's rows are stored in
// their order, on whatever subjects. The ordering key itself is not sent.
//
// Once the program installs an OpenTelemetry SDK, each send has a span
// "send <subject>" under the tracer github.com/idemq/idemq/natsjs, as
// grpcv5.OutboxSender's.
type OutboxSender struct{ js jetstream.JetStream }

var _ outbox.Sender = (*OutboxSender)(nil)

// NewOutboxSender returns an OutboxSender publishing through js.
func NewOutboxSender(js jetstream.JetStream) (*OutboxSender, error) {
	if js == nil {
		return nil, errors.New("natsjs: nil JetStream")
	}
	return &OutboxSender{js: js}, nil
}

// Send publishes m and waits for the stream's acknowledgement. A message
// no stream takes (no stream's subjects match its subject), one over the
// server's max payload or the stream's max message size, and an invalid
// subject wrap [outbox.ErrRefused], and the relay parks the row.
func (s *OutboxSender) Send(ctx context.Context, m *outbox.Message) error {
	if !tracectx.Tracing() {
		_, err := s.send(ctx, m, m.Properties)
		return err
	}
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	ctx, span := tracectx.StartSend(ctx, "github.com/idemq/idemq/natsjs", "nats", m.Topic, []tracectx.Message{{
		Get:  func(name string) string { return props[name] },
		Set:  func(name, v string) { props[name] = v },
		Keys: m.Keys, BodySize: len(m.Body), Ordered: m.OrderingKey != "",
	}})
	seq, err := s.send(ctx, m, props)
	errType := "failed"
	if errors.Is(err, outbox.ErrRefused) {
		errType = "refused"
	}
	tracectx.EndSend(span, seq, err, errType)
	return err
}

// send publishes m with props as its headers, and returns the stream
// sequence the server stored it at.
func (s *OutboxSender) send(ctx context.Context, m *outbox.Message, props map[string]string) (seq string, _ error) {
	msg := &nats.Msg{Subject: m.Topic, Data: m.Body, Header: make(nats.Header, len(props)+1)}
	for name, v := range props {
		msg.Header.Set(name, v)
	}
	msg.Header.Set(jetstream.MsgIDHeader, props[msgkey.Property])
	ack, err := s.js.PublishMsg(ctx, msg)
	if err == nil {
		return strconv.FormatUint(ack.Sequence, 10), nil
	}
	err = fmt.Errorf("natsjs: publish to %s: %w", m.Topic, err)
	if refused(err) {
		return "", fmt.Errorf("%w: %w", outbox.ErrRefused, err)
	}
	return "", err
}

// refused reports a publish error that no resend can change: no stream
// for the subject, a message over the server's max payload or the
// stream's max message size, an invalid subject.
func refused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrMaxPayload) ||
		errors.Is(err, nats.ErrBadSubject) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}
