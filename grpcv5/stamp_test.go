package grpcv5_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/msgkey"
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

// handedOver records, for each message a producer was given, its key and
// Keys at that moment; the client's Producer interface has an unexported
// method, so a stand-in embeds it (calling anything else panics). The
// real client is exercised through a proxy in proxy_test.go.
type handedOver struct {
	golang.Producer
	err error // what every send returns

	mu   sync.Mutex
	sent []string // "kind key keys"
}

func (h *handedOver) record(kind string, m *golang.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, kind+" "+key(m)+" "+strings.Join(m.GetKeys(), ","))
}

func (h *handedOver) Send(_ context.Context, m *golang.Message) ([]*golang.SendReceipt, error) {
	h.record("send", m)
	return []*golang.SendReceipt{{MessageID: "id"}}, h.err
}

func (h *handedOver) SendAsync(ctx context.Context, m *golang.Message, done func(context.Context, []*golang.SendReceipt, error)) {
	h.record("async", m)
	go done(ctx, nil, h.err)
}

func (h *handedOver) SendWithTransaction(_ context.Context, m *golang.Message, _ golang.Transaction) ([]*golang.SendReceipt, error) {
	h.record("tx", m)
	return []*golang.SendReceipt{{MessageID: "id"}}, h.err
}

type tx struct{ golang.Transaction }

func (h *handedOver) BeginTransaction() golang.Transaction { return tx{} }

func (h *handedOver) handed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sent)
}

func key(m *golang.Message) string { return msgkey.Of(msgkey.Properties(m.GetProperties())) }

func newProducer(t *testing.T, h *handedOver, keys *seqKeys) *grpcv5.Producer {
	t.Helper()
	p, err := grpcv5.NewProducer(h, keys)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sends are the ways to send, behind one signature.
var sends = []struct {
	kind string
	send func(context.Context, *grpcv5.Producer, *golang.Message) error
}{
	{"send", func(ctx context.Context, p *grpcv5.Producer, m *golang.Message) error {
		_, err := p.Send(ctx, m)
		return err
	}},
	{"async", func(ctx context.Context, p *grpcv5.Producer, m *golang.Message) error {
		done := make(chan error, 1)
		if err := p.SendAsync(ctx, m, func(_ context.Context, _ []*golang.SendReceipt, err error) { done <- err }); err != nil {
			return err
		}
		return <-done
	}},
	{"tx", func(ctx context.Context, p *grpcv5.Producer, m *golang.Message) error {
		_, err := p.SendWithTransaction(ctx, m, tx{})
		return err
	}},
}

// TestStampBeforeHandingOver sends a message twice each way: the wrapped
// producer is given it stamped, with the same key both times, and the
// caller's Keys kept (the rules are msgkey's TestStamp).
func TestStampBeforeHandingOver(t *testing.T) {
	for _, s := range sends {
		t.Run(s.kind, func(t *testing.T) {
			h := &handedOver{}
			p := newProducer(t, h, &seqKeys{})
			m := &golang.Message{Topic: "orders", Body: []byte("x")}
			m.SetKeys("customer-7")
			for range 2 {
				if err := s.send(t.Context(), p, m); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{s.kind + " k1 customer-7,k1", s.kind + " k1 customer-7,k1"}
			if got := h.handed(); !slices.Equal(got, want) {
				t.Fatalf("handed over %q, want %q", got, want)
			}
		})
	}
}

// TestRefusesWithoutSending checks every way to send: an invalid preset key
// or a failing key source is an error and nothing reaches the client.
func TestRefusesWithoutSending(t *testing.T) {
	boom := errors.New("clock moved backwards")
	for _, tc := range []struct {
		name    string
		preset  string
		keysErr error
		want    error
	}{
		{"space", "order 42", nil, msgkey.ErrInvalid},
		{"key source fails", "", boom, boom},
	} {
		for _, s := range sends {
			t.Run(tc.name+"/"+s.kind, func(t *testing.T) {
				h := &handedOver{}
				p := newProducer(t, h, &seqKeys{err: tc.keysErr})
				m := &golang.Message{Topic: "orders", Body: []byte("x")}
				if tc.preset != "" {
					m.AddProperty(msgkey.Property, tc.preset)
				}
				if err := s.send(t.Context(), p, m); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if got := h.handed(); len(got) > 0 {
					t.Fatalf("handed over %q", got)
				}
				if key(m) != tc.preset || len(m.GetKeys()) > 0 {
					t.Fatalf("the refused message changed: key %q Keys %q", key(m), m.GetKeys())
				}
			})
		}
	}
}

// TestSendErrors checks that the client's error comes back wrapped, each
// way, and the message keeps its key for the caller's resend.
func TestSendErrors(t *testing.T) {
	unavailable := errors.New("proxy unavailable")
	for _, s := range sends {
		t.Run(s.kind, func(t *testing.T) {
			p := newProducer(t, &handedOver{err: unavailable}, &seqKeys{})
			m := &golang.Message{Topic: "orders", Body: []byte("x")}
			if err := s.send(t.Context(), p, m); !errors.Is(err, unavailable) {
				t.Fatalf("got %v, want the client's error", err)
			}
			if key(m) != "k1" {
				t.Fatalf("key %q after a failed send, want k1 kept", key(m))
			}
		})
	}
}

func TestBadArguments(t *testing.T) {
	h := &handedOver{}
	p := newProducer(t, h, &seqKeys{})
	m := &golang.Message{Topic: "orders"}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"NewProducer nil producer", func() error { _, err := grpcv5.NewProducer(nil, &seqKeys{}); return err }},
		{"NewProducer nil key source", func() error { _, err := grpcv5.NewProducer(h, nil); return err }},
		{"Stamp nil message", func() error { return p.Stamp(t.Context(), nil) }},
		{"Send nil message", func() error { _, err := p.Send(t.Context(), nil); return err }},
		{"SendAsync nil message", func() error {
			return p.SendAsync(t.Context(), nil, func(context.Context, []*golang.SendReceipt, error) {})
		}},
		{"SendAsync nil callback", func() error { return p.SendAsync(t.Context(), m, nil) }},
		{"SendWithTransaction nil message", func() error {
			_, err := p.SendWithTransaction(t.Context(), nil, tx{})
			return err
		}},
		{"SendWithTransaction nil transaction", func() error { _, err := p.SendWithTransaction(t.Context(), m, nil); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if got := h.handed(); len(got) > 0 {
		t.Fatalf("handed over %q", got)
	}
}

// TestStampTraceContext: Stamp puts the sending span's context in the
// message's traceparent property, and a resend keeps the first one's.
func TestStampTraceContext(t *testing.T) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
	p := newProducer(t, &handedOver{}, &seqKeys{})
	m := &golang.Message{Topic: "orders", Body: []byte("x")}
	for span := range byte(2) {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{span + 1}, TraceFlags: trace.FlagsSampled})
		if err := p.Stamp(trace.ContextWithSpanContext(t.Context(), sc), m); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := m.GetProperties()["traceparent"], "00-07000000000000000000000000000000-0100000000000000-01"; got != want {
		t.Errorf("traceparent %q, want the first send's, %q", got, want)
	}
}
