package natsjs_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/natsjs"
	"github.com/idemq/idemq/outbox"
)

// attr is span's attribute key, as a string ("" if it has none).
func attr(span sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range span.Attributes() {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestTrace sends with an SDK installed: the Producer carries the
// publisher's trace context in the headers, and the consumer's span
// continues it, as system nats; the OutboxSender's span of a row without
// one is of kind Producer, names the stream sequence, and its context
// travels in the message. (Not parallel: it sets the global provider.)
func TestTrace(t *testing.T) {
	url := testenv.NATS(t)
	oldProp, oldTP := otel.GetTextMapPropagator(), otel.GetTracerProvider()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTextMapPropagator(oldProp); otel.SetTracerProvider(oldTP) })
	f := newFixture(t, url, jetstream.ConsumerConfig{AckWait: 2 * time.Second})

	p, err := natsjs.NewProducer(f.js, testkit.Keys(t, 31))
	if err != nil {
		t.Fatal(err)
	}
	ctx, pub := tp.Tracer("test").Start(t.Context(), "publish")
	msg := nats.NewMsg(f.subject)
	msg.Data = []byte("traced")
	if _, err := p.Publish(ctx, msg); err != nil {
		t.Fatal(err)
	}
	pub.End()
	c := newConsumer(t, f.durable)
	r, err := natsjs.Pull(c, f.consumer(t), func(context.Context, *consumer.Message) error { return nil }, natsjs.PullConfig{PollWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	closeIt := run(t, r)
	testkit.WaitFor(t, "the message applied", func() bool { return c.Stats().Completed == 1 })
	if err := closeIt(); err != nil {
		t.Fatal(err)
	}
	var process sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == "process "+f.subject {
			process = sp
		}
	}
	if process == nil {
		t.Fatalf("no span process %s among %d", f.subject, len(rec.Ended()))
	}
	if process.Parent().TraceID() != pub.SpanContext().TraceID() || attr(process, "messaging.system") != "nats" {
		t.Errorf("process span: parent %v, system %q; want the publisher's trace, nats", process.Parent(), attr(process, "messaging.system"))
	}

	s, err := natsjs.NewOutboxSender(f.js)
	if err != nil {
		t.Fatal(err)
	}
	row := &outbox.Message{Topic: f.subject, Body: []byte("row"), Properties: map[string]string{msgkey.Property: "row-1"}}
	if err := s.Send(t.Context(), row); err != nil {
		t.Fatal(err)
	}
	if _, ok := row.Properties["traceparent"]; ok {
		t.Error("the row's properties gained a traceparent")
	}
	spans := rec.Ended()
	send := spans[len(spans)-1]
	if send.Name() != "send "+f.subject || send.SpanKind() != trace.SpanKindProducer || attr(send, "messaging.system") != "nats" ||
		attr(send, "messaging.message.id") != "2" {
		t.Errorf("send span %q: kind %v, attributes %v", send.Name(), send.SpanKind(), send.Attributes())
	}
	stored, err := f.js.Stream(t.Context(), f.stream)
	if err != nil {
		t.Fatal(err)
	}
	got, err := stored.GetMsg(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	want := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), send.SpanContext()), want)
	if tp := got.Header.Get("traceparent"); tp != want["traceparent"] {
		t.Errorf("the row's message carried %q, want its send span's %q", tp, want["traceparent"])
	}
}
