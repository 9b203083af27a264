package remoting_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkStamp measures what stamping costs a message before it is sent:
// its key alone (no propagator, the default), and its key with the
// sending span's trace context (a W3C propagator set, a span in ctx): the
// propagation's own cost per message is the difference, which make bench
// shows as idemq-trace's ratio to key-only.
func BenchmarkStamp(b *testing.B) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	for _, tc := range []struct {
		name       string
		propagator propagation.TextMapPropagator
		ctx        context.Context
	}{
		{"key-only", propagation.NewCompositeTextMapPropagator(), context.Background()},
		{"idemq-trace", propagation.TraceContext{}, trace.ContextWithSpanContext(context.Background(), sc)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			old := otel.GetTextMapPropagator()
			otel.SetTextMapPropagator(tc.propagator)
			b.Cleanup(func() { otel.SetTextMapPropagator(old) })
			p := newProducer(b, &seqKeys{})
			b.ReportAllocs()
			for b.Loop() {
				m := primitive.NewMessage("orders", pathBody)
				if err := p.Stamp(tc.ctx, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
