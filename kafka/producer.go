package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemq/idemq/internal/tracectx"
	"github.com/idemq/idemq/msgkey"
)

// Producer wraps a *kgo.Client so that every record is stamped with its
// idempotency key before its first produce (see package msgkey's Stamp):
// the key goes in a record header named [msgkey.Property], and the
// record's own Key, which picks its partition, is left as it is. It does
// not close the client.
type Producer struct {
	cl   *kgo.Client
	keys msgkey.Source
}

// NewProducer returns a Producer producing through cl with keys from keys.
func NewProducer(cl *kgo.Client, keys msgkey.Source) (*Producer, error) {
	if cl == nil || keys == nil {
		return nil, errors.New("kafka: nil client or key source")
	}
	return &Producer{cl: cl, keys: keys}, nil
}

// Stamp gives every record without a key header a fresh key, and puts
// ctx's trace context in its headers (traceparent, tracestate) through
// the OpenTelemetry propagator the program sets, unless it carries one. It
// is idempotent: a record stamped again, or produced again after an
// error, keeps its key, so every attempt carries the same one. It fails
// without producing anything if a key is invalid ([msgkey.ErrInvalid]) or
// the key source fails; records stamped before the failure keep their
// keys.
func (p *Producer) Stamp(ctx context.Context, rs ...*kgo.Record) error {
	if len(rs) == 0 {
		return errors.New("kafka: no records")
	}
	for _, r := range rs {
		if r == nil {
			return errors.New("kafka: nil record")
		}
		h := headers{r}
		key, _, err := msgkey.Stamp(ctx, h, nil, p.keys.NextKey)
		if err != nil {
			return fmt.Errorf("kafka: topic %s: %w", r.Topic, err)
		}
		h.set(msgkey.Property, key)
		tracectx.Inject(ctx, h.GetProperty, h.set)
	}
	return nil
}

// ProduceSync stamps rs and produces them, waiting until the brokers
// have stored them all or failed; the error is the first record's error.
// The client retries a failed attempt itself, with the same headers; a
// caller that produces the same records again after an error keeps their
// keys too.
func (p *Producer) ProduceSync(ctx context.Context, rs ...*kgo.Record) (kgo.ProduceResults, error) {
	if err := p.Stamp(ctx, rs...); err != nil {
		return nil, err
	}
	res := p.cl.ProduceSync(ctx, rs...)
	if err := res.FirstErr(); err != nil {
		return res, fmt.Errorf("kafka: produce to %s: %w", rs[0].Topic, err)
	}
	return res, nil
}

// Produce stamps r and produces it without waiting: promise, which may be
// nil, is called as kgo.Client.Produce calls it. An error from Stamp is
// returned, and promise is then not called.
func (p *Producer) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := p.Stamp(ctx, r); err != nil {
		return err
	}
	p.cl.Produce(ctx, r, promise)
	return nil
}

// headers are a record's headers, read and written as properties: a
// name's last header wins.
type headers struct{ r *kgo.Record }

// GetProperty returns the value of r's last header called name, or "".
func (h headers) GetProperty(name string) string {
	for i := len(h.r.Headers) - 1; i >= 0; i-- {
		if h.r.Headers[i].Key == name {
			return string(h.r.Headers[i].Value)
		}
	}
	return ""
}

// set makes value the value of r's last header called name, which
// GetProperty reads, or adds one.
func (h headers) set(name, value string) {
	for i := len(h.r.Headers) - 1; i >= 0; i-- {
		if h.r.Headers[i].Key == name {
			if string(h.r.Headers[i].Value) != value {
				h.r.Headers[i].Value = []byte(value)
			}
			return
		}
	}
	h.r.Headers = append(h.r.Headers, kgo.RecordHeader{Key: name, Value: []byte(value)})
}

// KeyOf returns the idempotency key r carries in its [msgkey.Property]
// header, or "" when it has none.
func KeyOf(r *kgo.Record) string { return msgkey.Of(headers{r}) }
