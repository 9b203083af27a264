package remoting_test

import (
	"context"
	"errors"
	"maps"
	"math"
	"strings"
	"testing"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
	"github.com/idemq/idemq/remoting"
)

// sentProducer is a producer that records what SendSync sends and
// answers err, or SEND_OK with message id "MSG".
type sentProducer struct {
	rocketmq.Producer
	sent []*primitive.Message
	err  error
}

func (p *sentProducer) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	p.sent = append(p.sent, msgs...)
	if p.err != nil {
		return nil, p.err
	}
	return &primitive.SendResult{Status: primitive.SendOK, MsgID: "MSG"}, nil
}

// TestOutboxSenderSpans checks the relay's send spans through the remoting
// client: none without an SDK, and with one a "send" span per Send or
// SendBatch, linked to the rows' trace context and its child, that gives
// its own to rows that carry none, in what it sends, never in the rows.
func TestOutboxSenderSpans(t *testing.T) {
	oldProp, oldTP := otel.GetTextMapPropagator(), otel.GetTracerProvider()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(oldProp); otel.SetTracerProvider(oldTP) })
	created := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	carried := map[string]string{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), created), propagation.MapCarrier(carried))
	row := func(key string, traced bool) *outbox.Message {
		m := &outbox.Message{Topic: "orders", Body: []byte("x"), Keys: []string{key}, Properties: map[string]string{msgkey.Property: key}}
		if traced {
			m.Properties["traceparent"] = carried["traceparent"]
		}
		return m
	}
	tests := []struct {
		name     string
		sdk      bool
		rows     []*outbox.Message
		err      error
		wantSpan bool
		wantKind trace.SpanKind
		// wantParent: the span is the rows' context's child and links to
		// it; else a root without links.
		wantParent bool
		// wantInjected: what was sent carries the span's context.
		wantInjected bool
		wantStatus   codes.Code
	}{
		{name: "NoSDK", rows: []*outbox.Message{row("a", false)}},
		{name: "Row", sdk: true, rows: []*outbox.Message{row("a", true)}, wantSpan: true, wantKind: trace.SpanKindClient, wantParent: true},
		{name: "RowWithout", sdk: true, rows: []*outbox.Message{row("a", false)}, wantSpan: true, wantKind: trace.SpanKindProducer, wantInjected: true},
		{name: "Batch", sdk: true, rows: []*outbox.Message{row("a", false), row("b", false)}, wantSpan: true, wantKind: trace.SpanKindProducer, wantInjected: true},
		{name: "Refused", sdk: true, rows: []*outbox.Message{row("a", true)}, err: errors.New("CODE: 13, DESC: the message is illegal"),
			wantSpan: true, wantKind: trace.SpanKindClient, wantParent: true, wantStatus: codes.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			if tt.sdk {
				otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
			} else {
				otel.SetTracerProvider(oldTP)
			}
			before := make([]map[string]string, len(tt.rows))
			for i, r := range tt.rows {
				before[i] = maps.Clone(r.Properties)
			}
			p := &sentProducer{err: tt.err}
			s, err := remoting.NewOutboxSender(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.rows) == 1 {
				err = s.Send(t.Context(), tt.rows[0])
			} else {
				err = s.SendBatch(t.Context(), tt.rows)
			}
			if (err != nil) != (tt.err != nil) || errors.Is(err, outbox.ErrRefused) != (tt.err != nil) {
				t.Fatalf("send = %v, want refused %v", err, tt.err != nil)
			}
			spans := rec.Ended()
			if len(spans) != map[bool]int{false: 0, true: 1}[tt.wantSpan] {
				t.Fatalf("%d spans, want span %v", len(spans), tt.wantSpan)
			}
			for i, m := range p.sent {
				got := m.GetProperty("traceparent")
				switch {
				case tt.wantInjected && got != traceparentOf(spans[0].SpanContext()):
					t.Errorf("message %d sent with traceparent %q, want the span's", i, got)
				case !tt.wantInjected && got != tt.rows[i].Properties["traceparent"]:
					t.Errorf("message %d sent with traceparent %q, want the row's %q", i, got, tt.rows[i].Properties["traceparent"])
				}
				if !maps.Equal(tt.rows[i].Properties, before[i]) {
					t.Errorf("row %d's properties changed to %v", i, tt.rows[i].Properties)
				}
			}
			if !tt.wantSpan {
				return
			}
			sp := spans[0]
			if sp.Name() != "send orders" || sp.SpanKind() != tt.wantKind || sp.Status().Code != tt.wantStatus {
				t.Errorf("span %q, kind %v, status %v; want %q, %v, %v", sp.Name(), sp.SpanKind(), sp.Status(), "send orders", tt.wantKind, tt.wantStatus)
			}
			if linked := len(sp.Links()) == 1 && sp.Links()[0].SpanContext.SpanID() == created.SpanID(); tt.wantParent != (sp.Parent().SpanID() == created.SpanID()) || tt.wantParent != linked {
				t.Errorf("parent %v, links %v; want the rows' context for both: %v", sp.Parent(), sp.Links(), tt.wantParent)
			}
		})
	}
}

// traceparentOf is sc as the W3C propagator writes it.
func traceparentOf(sc trace.SpanContext) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c["traceparent"]
}

// TestBatchLimitCountsTraceContext checks that the properties limit of a
// batch (see SendBatch) counts the trace context the send span adds: a
// row 10 bytes under the limit ships without an SDK, and is refused, with
// nothing sent, when its send gives it a traceparent.
func TestBatchLimitCountsTraceContext(t *testing.T) {
	oldProp, oldTP := otel.GetTextMapPropagator(), otel.GetTracerProvider()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(oldProp); otel.SetTracerProvider(oldTP) })
	props := func(n int) map[string]string {
		return map[string]string{msgkey.Property: "b", "big": strings.Repeat("p", n)}
	}
	// The size the client gives the row's properties, as rowMessage builds
	// them, with n bytes of filler.
	size := func(n int) int {
		m := primitive.NewMessage("orders", []byte("x"))
		for k, v := range props(n) {
			m.WithProperty(k, v)
		}
		m.WithKeys([]string{"b"})
		return len(m.MarshallProperties())
	}
	fill := 32000 + math.MaxInt16 - 10 - size(32000)
	rows := func() []*outbox.Message {
		return []*outbox.Message{
			{Topic: "orders", Body: []byte("x"), Keys: []string{"a"}, Properties: map[string]string{msgkey.Property: "a"}},
			{Topic: "orders", Body: []byte("x"), Keys: []string{"b"}, Properties: props(fill)},
		}
	}
	for _, sdk := range []bool{false, true} {
		otel.SetTracerProvider(oldTP)
		if sdk {
			otel.SetTracerProvider(sdktrace.NewTracerProvider())
		}
		p := &sentProducer{}
		s, err := remoting.NewOutboxSender(p)
		if err != nil {
			t.Fatal(err)
		}
		err = s.SendBatch(context.Background(), rows())
		switch {
		case !sdk && (err != nil || len(p.sent) != 2):
			t.Errorf("without an SDK: SendBatch = %v, %d sends; want the batch shipped", err, len(p.sent))
		case sdk && (!errors.Is(err, outbox.ErrRefused) || len(p.sent) != 0):
			t.Errorf("with an SDK: SendBatch = %v, %d sends; want it refused before the wire", err, len(p.sent))
		}
	}
}
