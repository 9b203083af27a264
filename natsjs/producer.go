package natsjs

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/msgkey"
)

// Producer wraps a jetstream.JetStream so that every message is stamped
// with its idempotency key before its first publish (see package msgkey's
// Stamp). The key travels twice: in the header [msgkey.Property], which
// the consumer reads, and as the message id (the Nats-Msg-Id header), so
// that the stream's duplicate window drops a resend within it, and the
// dedupe store suppresses one after it. It is safe for concurrent use, but
// not for publishing one message from two goroutines at once (stamping
// writes to its headers).
type Producer struct {
	js   jetstream.JetStream
	keys msgkey.Source
}

// NewProducer returns a Producer publishing through js with keys from
// keys.
func NewProducer(js jetstream.JetStream, keys msgkey.Source) (*Producer, error) {
	if js == nil || keys == nil {
		return nil, errors.New("natsjs: nil JetStream or key source")
	}
	return &Producer{js: js, keys: keys}, nil
}

// header is a message's headers as package msgkey reads them.
type header nats.Header

func (h header) GetProperty(name string) string { return nats.Header(h).Get(name) }

// Stamp gives msg a key unless it carries one and sets it as the message
// id, and puts ctx's trace context in its headers (traceparent,
// tracestate) through the OpenTelemetry propagator the program sets,
// unless they carry one. The key is the [msgkey.Property] header's, else
// the message id (Nats-Msg-Id) the caller set, else a new one: a message
// whose id the caller chose keeps it as its key. Stamping a message again
// changes nothing. It fails, leaving msg unchanged, if msg's key is
// invalid ([msgkey.ErrInvalid]) or the key source fails.
func (p *Producer) Stamp(ctx context.Context, msg *nats.Msg) error {
	if msg == nil {
		return errors.New("natsjs: nil message")
	}
	h := header(msg.Header)
	next := p.keys.NextKey
	if id := h.GetProperty(jetstream.MsgIDHeader); id != "" {
		next = func(context.Context) (string, error) { return id, nil }
	}
	key, _, err := msgkey.Stamp(ctx, h, nil, next)
	if err != nil {
		return fmt.Errorf("natsjs: subject %s: %w", msg.Subject, err)
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(msgkey.Property, key)
	msg.Header.Set(jetstream.MsgIDHeader, key)
	tracectx.Inject(ctx, msg.Header.Get, msg.Header.Set)
	return nil
}

// Publish stamps msg and publishes it, waiting for the stream's
// acknowledgement. A caller that publishes msg again after an error
// (a timeout whose publish the stream stored) sends the same key and
// message id: the stream drops the copy within its duplicate window
// (jetstream.PubAck's Duplicate says so), and the consumer's store
// suppresses it after.
func (p *Producer) Publish(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := p.Stamp(ctx, msg); err != nil {
		return nil, err
	}
	ack, err := p.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsjs: publish to %s: %w", msg.Subject, err)
	}
	return ack, nil
}

// PublishAsync stamps msg and publishes it without waiting; the returned
// future answers the stream's acknowledgement. When PublishAsync returns
// an error, the future is nil. The caller that sends msg again after its
// future failed sends the same key.
func (p *Producer) PublishAsync(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if err := p.Stamp(ctx, msg); err != nil {
		return nil, err
	}
	f, err := p.js.PublishMsgAsync(msg, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsjs: publish to %s: %w", msg.Subject, err)
	}
	return f, nil
}
