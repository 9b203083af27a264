package tracectx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemq/idemq/internal/tracectx"
)

// withProvider sets the global tracer provider for the test.
func withProvider(t *testing.T, tp trace.TracerProvider) {
	old := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(old) })
}

// traceparent is sc as a message carries it.
func traceparent(sc trace.SpanContext) string { return tracectx.Format(sc) }

func spanContext(trace0, span byte) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{trace0}, SpanID: trace.SpanID{span}, TraceFlags: trace.FlagsSampled, Remote: true})
}

// TestTracingWithoutSDK checks that a sender's question costs nothing
// while no SDK is installed, and that a noop provider counts as none.
func TestTracingWithoutSDK(t *testing.T) {
	if tracectx.Tracing() {
		t.Fatal("Tracing() with the global provider unset = true")
	}
	if n := testing.AllocsPerRun(100, func() { _ = tracectx.Tracing() }); n != 0 {
		t.Errorf("Tracing() costs %v allocations, want 0", n)
	}
	withProvider(t, noop.NewTracerProvider())
	if tracectx.Tracing() {
		t.Error("Tracing() with a noop provider = true")
	}
	withProvider(t, sdktrace.NewTracerProvider())
	if !tracectx.Tracing() {
		t.Error("Tracing() with an SDK = false")
	}
}

// TestSendSpan checks a send span's parent, links, kind and attributes,
// and the trace context it gives a message that carries none.
func TestSendSpan(t *testing.T) {
	withPropagator(t, propagation.TraceContext{})
	rec := tracetest.NewSpanRecorder()
	withProvider(t, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	created, other, ambient := spanContext(1, 1), spanContext(2, 2), spanContext(3, 3)
	type msg struct {
		carries string // the traceparent the message carries
		keys    []string
		tag     string
		group   string
	}
	tests := []struct {
		name       string
		system     string
		ctx        trace.SpanContext // the sender's context's span, if valid
		msgs       []msg
		err        error
		id         string
		wantKind   trace.SpanKind
		wantParent trace.SpanContext // invalid: a root
		wantLinks  []trace.SpanContext
		// wantInjected says message 0, carrying none, gets the span's
		// context.
		wantInjected bool
		wantAttrs    map[attribute.Key]attribute.Value
		wantMissing  []attribute.Key
	}{
		{name: "RowWithContext", msgs: []msg{{carries: traceparent(created), keys: []string{"k1"}, tag: "created"}}, id: "MSG1",
			wantKind: trace.SpanKindClient, wantParent: created, wantLinks: []trace.SpanContext{created},
			wantAttrs: map[attribute.Key]attribute.Value{
				"messaging.system":                attribute.StringValue("rocketmq"),
				"messaging.operation.type":        attribute.StringValue("send"),
				"messaging.operation.name":        attribute.StringValue("send"),
				"messaging.destination.name":      attribute.StringValue("orders"),
				"messaging.rocketmq.message.keys": attribute.StringSliceValue([]string{"k1"}),
				"messaging.rocketmq.message.tag":  attribute.StringValue("created"),
				"messaging.rocketmq.message.type": attribute.StringValue("normal"),
				"messaging.message.body.size":     attribute.IntValue(4),
				"messaging.message.id":            attribute.StringValue("MSG1"),
			},
			wantMissing: []attribute.Key{"messaging.batch.message_count", "messaging.rocketmq.message.group", "error.type"}},
		{name: "RowWithout", msgs: []msg{{group: "order-42"}},
			wantKind: trace.SpanKindProducer, wantInjected: true,
			wantAttrs: map[attribute.Key]attribute.Value{
				"messaging.rocketmq.message.type":  attribute.StringValue("fifo"),
				"messaging.rocketmq.message.group": attribute.StringValue("order-42"),
			},
			wantMissing: []attribute.Key{"messaging.rocketmq.message.keys", "messaging.rocketmq.message.tag"}},
		{name: "Kafka", system: "kafka", msgs: []msg{{carries: traceparent(created), keys: []string{"k1"}, tag: "created", group: "order-42"}},
			wantKind: trace.SpanKindClient, wantParent: created, wantLinks: []trace.SpanContext{created},
			wantAttrs: map[attribute.Key]attribute.Value{
				"messaging.system":            attribute.StringValue("kafka"),
				"messaging.message.body.size": attribute.IntValue(4),
			},
			wantMissing: []attribute.Key{"messaging.rocketmq.message.keys", "messaging.rocketmq.message.tag",
				"messaging.rocketmq.message.type", "messaging.rocketmq.message.group"}},
		{name: "Ambient", ctx: ambient, msgs: []msg{{carries: traceparent(created)}},
			wantKind: trace.SpanKindClient, wantParent: ambient, wantLinks: []trace.SpanContext{created}},
		{name: "BatchOfTwoTraces", msgs: []msg{{carries: traceparent(created)}, {carries: traceparent(other)}},
			wantKind: trace.SpanKindClient, wantLinks: []trace.SpanContext{created, other},
			wantAttrs:   map[attribute.Key]attribute.Value{"messaging.batch.message_count": attribute.IntValue(2)},
			wantMissing: []attribute.Key{"messaging.rocketmq.message.type", "messaging.message.body.size"}},
		{name: "BatchOfOneTrace", msgs: []msg{{carries: traceparent(created)}, {carries: traceparent(created)}},
			wantKind: trace.SpanKindClient, wantParent: created, wantLinks: []trace.SpanContext{created, created}},
		{name: "Unreadable", msgs: []msg{{carries: "00-not-a-trace-01"}},
			wantKind: trace.SpanKindClient},
		{name: "Refused", msgs: []msg{{carries: traceparent(created)}}, err: errors.New("refused"),
			wantKind: trace.SpanKindClient, wantParent: created, wantLinks: []trace.SpanContext{created},
			wantAttrs:   map[attribute.Key]attribute.Value{"error.type": attribute.StringValue("refused")},
			wantMissing: []attribute.Key{"messaging.message.id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			ctx := context.Background()
			if tt.ctx.IsValid() {
				ctx = trace.ContextWithSpanContext(ctx, tt.ctx)
			}
			props := make([]map[string]string, len(tt.msgs))
			ms := make([]tracectx.Message, len(tt.msgs))
			for i, m := range tt.msgs {
				p := map[string]string{}
				if m.carries != "" {
					p[tracectx.Parent] = m.carries
				}
				props[i] = p
				ms[i] = tracectx.Message{Get: func(k string) string { return p[k] }, Set: func(k, v string) { p[k] = v },
					Keys: m.keys, Tag: m.tag, BodySize: 4, Ordered: m.group != "", Group: m.group}
			}
			_, span := tracectx.StartSend(ctx, "test", tt.system, "orders", ms)
			tracectx.EndSend(span, tt.id, tt.err, "refused")
			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans ended, want 1", len(ended))
			}
			s := ended[0]
			if s.Name() != "send orders" || s.SpanKind() != tt.wantKind {
				t.Errorf("span %q of kind %v, want %q of kind %v", s.Name(), s.SpanKind(), "send orders", tt.wantKind)
			}
			if p := s.Parent(); !sameSpan(p, tt.wantParent) {
				t.Errorf("parent %v, want %v", p, tt.wantParent)
			}
			if tt.wantParent.IsValid() && s.SpanContext().TraceID() != tt.wantParent.TraceID() {
				t.Errorf("trace %v, want the parent's %v", s.SpanContext().TraceID(), tt.wantParent.TraceID())
			}
			links := s.Links()
			if len(links) != len(tt.wantLinks) {
				t.Fatalf("links %v, want %v", links, tt.wantLinks)
			}
			for i, l := range links {
				if !sameSpan(l.SpanContext, tt.wantLinks[i]) {
					t.Errorf("link %d to %v, want %v", i, l.SpanContext, tt.wantLinks[i])
				}
			}
			got := props[0][tracectx.Parent]
			switch want := traceparent(s.SpanContext()); {
			case tt.wantInjected && got != want:
				t.Errorf("message 0 carries %q, want the span's %q", got, want)
			case !tt.wantInjected && got != tt.msgs[0].carries:
				t.Errorf("message 0 carries %q, want what it carried, %q", got, tt.msgs[0].carries)
			}
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			for k, want := range tt.wantAttrs {
				if attrs[k] != want {
					t.Errorf("%s = %v, want %v", k, attrs[k].Emit(), want.Emit())
				}
			}
			for _, k := range tt.wantMissing {
				if v, ok := attrs[k]; ok {
					t.Errorf("%s = %v, want none", k, v.Emit())
				}
			}
			if (tt.err != nil) != (s.Status().Code == codes.Error) {
				t.Errorf("status %v for error %v", s.Status(), tt.err)
			}
		})
	}
}

// sameSpan compares trace and span ids, not whether a context is remote.
func sameSpan(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}

// TestFormatParse checks that a span context goes through a dedupe record
// unchanged, and that what is not a traceparent parses as nothing.
func TestFormatParse(t *testing.T) {
	want := spanContext(9, 8)
	s := tracectx.Format(want)
	if got, ok := tracectx.Parse(s); !ok || !sameSpan(got, want) || got.TraceFlags() != want.TraceFlags() {
		t.Errorf("Parse(Format(%v)) = %v, %v", want, got, ok)
	}
	if s := tracectx.Format(trace.SpanContext{}); s != "" {
		t.Errorf("Format of an invalid context = %q, want empty", s)
	}
	for _, bad := range []string{"", "00-not-a-trace-01", s[:54], "01" + s[2:], s[:3] + "00000000000000000000000000000000" + s[35:], s[:53] + "zz"} {
		if got, ok := tracectx.Parse(bad); ok || got.IsValid() {
			t.Errorf("Parse(%q) = %v, %v; want nothing", bad, got, ok)
		}
	}
}

// FuzzParse checks that Parse takes exactly what Format writes: a
// traceparent it reads is written back the same (but for the case of its
// hex digits), and it never panics.
func FuzzParse(f *testing.F) {
	f.Add(tracectx.Format(spanContext(9, 8)))
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		sc, ok := tracectx.Parse(s)
		if ok != sc.IsValid() {
			t.Fatalf("Parse(%q) = %v, ok %v", s, sc, ok)
		}
		if ok && !strings.EqualFold(tracectx.Format(sc), s) {
			t.Fatalf("Parse(%q) reads %q", s, tracectx.Format(sc))
		}
	})
}
