package grpcv5_test

import (
	"context"
	"maps"
	"testing"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/outbox"
)

// sentProducer is a producer that records what Send sends.
type sentProducer struct {
	golang.Producer
	sent []*golang.Message
}

func (p *sentProducer) Send(_ context.Context, m *golang.Message) ([]*golang.SendReceipt, error) {
	p.sent = append(p.sent, m)
	return []*golang.SendReceipt{{MessageID: "MSG"}}, nil
}

// TestOutboxSenderSpanOfRowWithout checks the send span of a row that
// carries no trace context, off the proxy: of kind Producer, with the
// row's message group, its context in the message sent and not in the
// row, which a later send ships afresh.
func TestOutboxSenderSpanOfRowWithout(t *testing.T) {
	oldProp, oldTP := otel.GetTextMapPropagator(), otel.GetTracerProvider()
	rec := tracetest.NewSpanRecorder()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTextMapPropagator(oldProp); otel.SetTracerProvider(oldTP) })
	p := &sentProducer{}
	s, err := grpcv5.NewOutboxSender(p)
	if err != nil {
		t.Fatal(err)
	}
	row := &outbox.Message{Topic: "orders", Body: []byte("x"), Keys: []string{"k"}, OrderingKey: "order-42", Properties: map[string]string{"IDEMQ_KEY": "k"}}
	before := maps.Clone(row.Properties)
	for range 2 {
		if err := s.Send(t.Context(), row); err != nil {
			t.Fatal(err)
		}
	}
	spans := rec.Ended()
	if len(spans) != 2 || len(p.sent) != 2 {
		t.Fatalf("%d spans, %d sent; want 2 each", len(spans), len(p.sent))
	}
	for i, sp := range spans {
		c := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sp.SpanContext()), c)
		if got := p.sent[i].GetProperties()["traceparent"]; got != c["traceparent"] {
			t.Errorf("send %d carried %q, want its span's %q", i, got, c["traceparent"])
		}
		if sp.SpanKind() != trace.SpanKindProducer || attr(sp, "messaging.rocketmq.message.group") != "order-42" ||
			attr(sp, "messaging.rocketmq.message.type") != "fifo" || attr(sp, "messaging.message.id") != "MSG" {
			t.Errorf("span %d: kind %v, attributes %v", i, sp.SpanKind(), sp.Attributes())
		}
	}
	if !maps.Equal(row.Properties, before) {
		t.Errorf("the row's properties changed to %v", row.Properties)
	}
}
