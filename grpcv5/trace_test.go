package grpcv5_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	golang "github.com/apache/rocketmq-clients/golang/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemq/idemq/dialect"
	"github.com/idemq/idemq/grpcv5"
	"github.com/idemq/idemq/internal/racechild"
	"github.com/idemq/idemq/internal/testdb"
	"github.com/idemq/idemq/internal/testenv"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
	"github.com/idemq/idemq/outbox"
)

// TestTraceThroughTheProxy follows one trace across the gRPC client on a
// real 5.x proxy, with the program's SDK and W3C propagator installed
// (in-memory span recorder): a message sent by the adapter's Producer in
// a span is processed under a child of that span; a copy of it sent again
// is suppressed under a span that links to the run that applied it, named
// by the Redis record; an outbox row written in a span is relayed under a
// "send" span, child of the row's span and linked to it, and processed
// under a child of the row's span too.
func TestTraceThroughTheProxy(t *testing.T) {
	ep := testenv.RocketMQ5(t)
	if !racechild.Test(t, "IDEMQ_ROCKETMQ5_NAMESRV="+ep.NameServer, "IDEMQ_ROCKETMQ5_PROXY="+ep.Proxy,
		"IDEMQ_REDIS_ADDR="+testenv.Redis(t), "IDEMQ_MYSQL_DSN="+testenv.MySQL(t)) {
		return
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	oldTP, oldProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(oldTP); otel.SetTextMapPropagator(oldProp) })
	tracer := tp.Tracer("service-a")

	f := newFixture(t, "trace", 16)
	l := newLedger()
	f.receive(f.consumer(), f.simpleConsumer(), l.handle, grpcv5.SimpleConfig{})
	raw := f.producer()

	// A message sent by the adapter's Producer, in a span.
	p, err := grpcv5.NewProducer(raw, testkit.Keys(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, placed := tracer.Start(t.Context(), "place order")
	m := &golang.Message{Topic: f.topic, Body: []byte("order 1")}
	if _, err := p.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	placed.End()
	sentKey := msgkey.Of(msgkey.Properties(m.GetProperties()))

	// An outbox row, written in a span and relayed through the proxy.
	db := testdb.MySQL.Open(t)
	o, err := outbox.New(db, dialect.MySQL, testkit.Keys(t, 2), outbox.Config{
		TraceContext: func(ctx context.Context, props map[string]string) {
			otel.GetTextMapPropagator().Inject(ctx, propagation.MapCarrier(props))
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	wctx, wrote := tracer.Start(t.Context(), "write row")
	tx, err := db.BeginTx(wctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rowKey, err := o.Add(wctx, tx, outbox.Message{Topic: f.topic, Tags: "created", Body: []byte("order 2")})
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	wrote.End()
	s, err := grpcv5.NewOutboxSender(raw)
	if err != nil {
		t.Fatal(err)
	}
	r, err := outbox.NewRelay(o, s, outbox.RelayConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	// process finds the consumer's span of the message with key k and
	// outcome out, waiting for it.
	process := func(k, out string) sdktrace.ReadOnlySpan {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			for _, s := range spans.Ended() {
				if s.SpanKind() == trace.SpanKindConsumer && attr(s, "idemq.key") == k && attr(s, "idemq.outcome") == out {
					return s
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s span of %s after 60s; applied %v", out, k, l.snapshot())
			}
		}
	}
	first := process(sentKey, "completed")
	if !sameSpan(first.Parent(), placed.SpanContext()) || first.SpanContext().TraceID() != placed.SpanContext().TraceID() {
		t.Errorf("the message's span has parent %v, want the sender's span %v", first.Parent(), placed.SpanContext())
	}

	// The same message again, as a producer's retry sends it: key and
	// trace context as stamped.
	if _, err := raw.Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	dup := process(sentKey, "suppressed")
	if links := dup.Links(); !slices.ContainsFunc(links, func(l sdktrace.Link) bool {
		return sameSpan(l.SpanContext, first.SpanContext()) && slices.Contains(l.Attributes, attribute.String("idemq.link", "applied"))
	}) {
		t.Errorf("the duplicate's span links %v, want one to the applying run's span %v (idemq.link=applied)", links, first.SpanContext())
	}
	if !sameSpan(dup.Parent(), placed.SpanContext()) {
		t.Errorf("the duplicate's span has parent %v, want the sender's span %v", dup.Parent(), placed.SpanContext())
	}

	row := process(rowKey, "completed")
	if !sameSpan(row.Parent(), wrote.SpanContext()) {
		t.Errorf("the row's span has parent %v, want the writer's span %v", row.Parent(), wrote.SpanContext())
	}
	var send sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "send "+f.topic && s.InstrumentationScope().Name == "github.com/idemq/idemq/grpcv5" {
			send = s
		}
	}
	switch {
	case send == nil:
		t.Fatal("no send span of the relay")
	case !sameSpan(send.Parent(), wrote.SpanContext()) || len(send.Links()) != 1 || !sameSpan(send.Links()[0].SpanContext, wrote.SpanContext()):
		t.Errorf("the relay's span has parent %v and links %v, want the writer's span %v for both", send.Parent(), send.Links(), wrote.SpanContext())
	case send.SpanKind() != trace.SpanKindClient || attr(send, "messaging.rocketmq.message.keys") != `["`+rowKey+`"]` || attr(send, "messaging.message.id") == "":
		t.Errorf("the relay's span: kind %v, attributes %v", send.SpanKind(), send.Attributes())
	}
	if got := l.snapshot(); got[sentKey] != 1 || got[rowKey] != 1 {
		t.Errorf("applied %v, want each key once", got)
	}
}

// attr is s's attribute key as text, "" when s has none.
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// sameSpan compares trace and span ids, not whether a context is remote.
func sameSpan(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}
