package grpcv5

import (
	"context"
	"errors"
	"fmt"

	golang "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/msgkey"
)

// Producer wraps a golang.Producer so that every message is stamped with
// its idempotency key before its first send (see package msgkey's Stamp): it
// stamps a message's key, then sends it. It does not start or stop the wrapped producer. It is safe for
// concurrent use, but not for sending one message from two goroutines at
// once (stamping writes to the message).
type Producer struct {
	p    golang.Producer
	keys msgkey.Source
}

// NewProducer returns a Producer sending through p with keys from keys.
func NewProducer(p golang.Producer, keys msgkey.Source) (*Producer, error) {
	if p == nil || keys == nil {
		return nil, errors.New("grpcv5: nil producer or key source")
	}
	return &Producer{p: p, keys: keys}, nil
}

// Stamp gives msg a fresh key unless it carries one and makes sure the key
// is also among its Keys, and puts ctx's trace context in its properties
// (traceparent, tracestate) through the OpenTelemetry propagator the
// program sets, unless it carries one. Stamping a message again changes
// nothing. It fails, leaving msg unchanged, if msg's key is invalid
// ([msgkey.ErrInvalid]) or the key source fails.
func (p *Producer) Stamp(ctx context.Context, msg *golang.Message) error {
	if msg == nil {
		return errors.New("grpcv5: nil message")
	}
	key, withKey, err := msgkey.Stamp(ctx, msgkey.Properties(msg.GetProperties()), msg.GetKeys(), p.keys.NextKey)
	if err != nil {
		return fmt.Errorf("grpcv5: topic %s: %w", msg.Topic, err)
	}
	msg.AddProperty(msgkey.Property, key)
	msg.SetKeys(withKey...)
	tracectx.Inject(ctx, func(name string) string { return msg.GetProperties()[name] }, msg.AddProperty)
	return nil
}

// Send stamps msg and sends it. The client retries a failed attempt
// internally with the same key; a caller that sends msg again after an
// error keeps its key too.
func (p *Producer) Send(ctx context.Context, msg *golang.Message) ([]*golang.SendReceipt, error) {
	if err := p.Stamp(ctx, msg); err != nil {
		return nil, err
	}
	res, err := p.p.Send(ctx, msg)
	if err != nil {
		return res, fmt.Errorf("grpcv5: send to %s: %w", msg.Topic, err)
	}
	return res, nil
}

// SendAsync stamps msg and sends it without waiting; the client calls done
// once with the outcome. When SendAsync returns an error, nothing was sent
// and done is not called.
func (p *Producer) SendAsync(ctx context.Context, msg *golang.Message, done func(context.Context, []*golang.SendReceipt, error)) error {
	if done == nil {
		return errors.New("grpcv5: nil callback") // the client would panic calling it, on its own goroutine
	}
	if err := p.Stamp(ctx, msg); err != nil {
		return err
	}
	p.p.SendAsync(ctx, msg, done)
	return nil
}

// SendWithTransaction stamps msg and sends it as a half message of tx,
// which the wrapped producer's BeginTransaction returned. The caller then runs its local
// transaction (the key is msgkey.Of(msgkey.Properties(msg.GetProperties())))
// and calls tx.Commit or tx.RollBack; if it does neither, the broker asks
// the producer's TransactionChecker, which sees the same key.
func (p *Producer) SendWithTransaction(ctx context.Context, msg *golang.Message, tx golang.Transaction) ([]*golang.SendReceipt, error) {
	if tx == nil {
		return nil, errors.New("grpcv5: nil transaction")
	}
	if err := p.Stamp(ctx, msg); err != nil {
		return nil, err
	}
	res, err := p.p.SendWithTransaction(ctx, msg, tx)
	if err != nil {
		return res, fmt.Errorf("grpcv5: send in transaction to %s: %w", msg.Topic, err)
	}
	return res, nil
}
