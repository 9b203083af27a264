package remoting_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	rmqproducer "github.com/apache/rocketmq-client-go/v2/producer"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/remoting"
)

// seqKeys issues "k1", "k2", ... or fails when err is set.
type seqKeys struct {
	n   atomic.Int64
	err error
}

func (s *seqKeys) NextKey(context.Context) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	return fmt.Sprintf("k%d", s.n.Add(1)), nil
}

func newProducer(t testing.TB, keys msgkey.Source) *remoting.Producer {
	t.Helper()
	// A real client that is never started: Stamp does not touch it, and a
	// send fails before reaching it when stamping fails.
	rp, err := rocketmq.NewProducer(rmqproducer.WithNameServer([]string{"127.0.0.1:1"}),
		rmqproducer.WithInstanceName(t.Name())) // the example's client has the default one
	if err != nil {
		t.Fatal(err)
	}
	p, err := remoting.NewProducer(rp, keys)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStamp checks how Stamp carries the key in the client's message (the
// rules are msgkey's TestStamp): in its property and among its Keys, the
// caller's Keys kept, the same key on a resend; and the trace context of
// the first send in the traceparent property.
func TestStamp(t *testing.T) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
	p := newProducer(t, &seqKeys{})
	m := primitive.NewMessage("orders", []byte("x"))
	m.WithKeys([]string{"customer-7"})
	for span := range byte(3) { // a resend stamps again, in another span
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{span + 1}, TraceFlags: trace.FlagsSampled})
		if err := p.Stamp(trace.ContextWithSpanContext(context.Background(), sc), m); err != nil {
			t.Fatal(err)
		}
	}
	if msgkey.Of(m) != "k1" || m.GetKeys() != "customer-7 k1" {
		t.Fatalf("key %q Keys %q, want k1 and customer-7 k1", msgkey.Of(m), m.GetKeys())
	}
	if got, want := m.GetProperty("traceparent"), "00-07000000000000000000000000000000-0100000000000000-01"; got != want {
		t.Errorf("traceparent %q, want the first send's, %q", got, want)
	}
}

// TestStampRefuses: an invalid preset key, or a key source that fails, is
// an error from Stamp and from SendSync before it sends, and leaves the
// message as it was.
func TestStampRefuses(t *testing.T) {
	boom := errors.New("clock moved backwards")
	for _, tc := range []struct {
		name, preset string
		want         error
	}{{"InvalidKey", "order 42", msgkey.ErrInvalid}, {"KeySourceFails", "", boom}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProducer(t, &seqKeys{err: boom})
			m := primitive.NewMessage("orders", []byte("x"))
			if tc.preset != "" {
				m.WithProperty(msgkey.Property, tc.preset)
			}
			if err := p.Stamp(context.Background(), m); !errors.Is(err, tc.want) {
				t.Fatalf("Stamp: %v, want %v", err, tc.want)
			}
			if _, err := p.SendSync(context.Background(), m); !errors.Is(err, tc.want) {
				t.Fatalf("SendSync: %v, want %v before sending", err, tc.want)
			}
			if msgkey.Of(m) != tc.preset || m.GetKeys() != "" {
				t.Fatalf("the refused message changed: key %q Keys %q", msgkey.Of(m), m.GetKeys())
			}
		})
	}
}

func TestStampBadArguments(t *testing.T) {
	p := newProducer(t, &seqKeys{})
	if err := p.Stamp(context.Background()); err == nil {
		t.Fatal("no messages: want an error")
	}
	if err := p.Stamp(context.Background(), nil); err == nil {
		t.Fatal("nil message: want an error")
	}
	if _, err := remoting.NewProducer(nil, &seqKeys{}); err == nil {
		t.Fatal("nil producer: want an error")
	}
}
