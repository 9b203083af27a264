package tracectx_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/internal/tracectx"
)

var sc = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{1, 2, 3},
	SpanID:     trace.SpanID{4, 5, 6},
	TraceFlags: trace.FlagsSampled,
})

// withPropagator sets the global propagator for the test.
func withPropagator(t *testing.T, p propagation.TextMapPropagator) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(p)
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
}

func TestInjectExtract(t *testing.T) {
	withPropagator(t, propagation.TraceContext{})
	props := map[string]string{}
	get := func(k string) string { return props[k] }
	set := func(k, v string) { props[k] = v }
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	tracectx.Inject(ctx, get, set)
	want := "00-01020300000000000000000000000000-0405060000000000-01"
	if props[tracectx.Parent] != want {
		t.Fatalf("traceparent = %q, want %q", props[tracectx.Parent], want)
	}
	// A message sent again keeps the context of its first send.
	other := trace.ContextWithSpanContext(context.Background(), sc.WithSpanID(trace.SpanID{9}))
	tracectx.Inject(other, get, set)
	if props[tracectx.Parent] != want {
		t.Errorf("traceparent after a second Inject = %q, want the first", props[tracectx.Parent])
	}
	got, unreadable := tracectx.Extract(context.Background(), get)
	if rsc := trace.SpanContextFromContext(got); unreadable || !rsc.IsRemote() || rsc.TraceID() != sc.TraceID() || rsc.SpanID() != sc.SpanID() {
		t.Errorf("Extract = %v (unreadable %v), want the injected span context, remote", rsc, unreadable)
	}
}

func TestExtract(t *testing.T) {
	for _, tt := range []struct {
		name       string
		propagator propagation.TextMapPropagator
		props      map[string]string
		unreadable bool
	}{
		{"nothing carried", propagation.TraceContext{}, nil, false},
		{"unreadable", propagation.TraceContext{}, map[string]string{tracectx.Parent: "00-zz-01"}, true},
		{"no propagator", propagation.NewCompositeTextMapPropagator(), map[string]string{tracectx.Parent: "00-zz-01"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			withPropagator(t, tt.propagator)
			ctx, unreadable := tracectx.Extract(context.Background(), func(k string) string { return tt.props[k] })
			if unreadable != tt.unreadable || trace.SpanContextFromContext(ctx).IsValid() {
				t.Errorf("Extract = %v, unreadable %v; want no span context, unreadable %v", trace.SpanContextFromContext(ctx), unreadable, tt.unreadable)
			}
		})
	}
}

func TestInjectWithoutSpan(t *testing.T) {
	withPropagator(t, propagation.TraceContext{})
	props := map[string]string{}
	tracectx.Inject(context.Background(), func(k string) string { return props[k] }, func(k, v string) { props[k] = v })
	if len(props) != 0 {
		t.Errorf("Inject without a span wrote %v", props)
	}
}
