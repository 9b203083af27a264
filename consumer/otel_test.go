package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idemq/idemq/consumer"
	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/dedupe/memdedupe"
	"github.com/idemq/idemq/internal/adapter"
	"github.com/idemq/idemq/internal/dedupekit"
	"github.com/idemq/idemq/internal/testkit"
	"github.com/idemq/idemq/msgkey"
)

const otelGroup = "otel-group"

// otelMsg is a message of topic orders with key (none when empty), id and
// body.
func otelMsg(key, id, body string) consumer.Message {
	m := message(id, key, 0)
	m.Body = []byte(body)
	return m
}

var errHandler = errors.New("handler failed")

// TestTelemetry delivers messages that end in each outcome the test can
// bring about, with an SDK installed, and checks the counter per outcome,
// the latency histograms and the spans.
func TestTelemetry(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mem := memdedupe.New(memdedupe.Config{})
	store := testkit.NewFaultStore(mem)
	c, err := consumer.New(store, otelGroup,
		consumer.WithTelemetry(mp, tp),
		consumer.WithLogger(slog.New(slog.DiscardHandler)),
		consumer.WithBusyWait(time.Nanosecond), consumer.WithStoreDownWait(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	inHandler := map[string]trace.SpanContext{} // by message id: the span in the handler's context
	h := func(ctx context.Context, m *consumer.Message) error {
		mu.Lock()
		inHandler[m.ID] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		if msgkey.Of(m) == "fail" {
			return errHandler
		}
		return nil
	}

	// Another consumer holds the key "busy".
	busyBody := "body busy"
	if _, err := testkit.Claim(t.Context(), mem, dedupe.Item{Ref: dedupe.Ref{Group: otelGroup, Key: "busy"}, Fingerprint: dedupekit.Fingerprint([]byte(busyBody))}, time.Minute); err != nil {
		t.Fatal(err)
	}

	deliveries := []struct {
		msgs  []consumer.Message
		fault testkit.Fault // Ops 0: none
		ack   bool
	}{
		{msgs: []consumer.Message{otelMsg("a", "m-completed", "body a")}, ack: true},
		{msgs: []consumer.Message{otelMsg("a", "m-suppressed", "body a")}, ack: true},
		{msgs: []consumer.Message{otelMsg("fail", "m-failed", "body fail")}},
		{msgs: []consumer.Message{otelMsg("", "m-invalid-key", "no key")}},
		{msgs: []consumer.Message{otelMsg("a", "m-reused", "another body")}},
		{msgs: []consumer.Message{otelMsg("busy", "m-busy", busyBody)}},
		{msgs: []consumer.Message{otelMsg("down", "m-store-down", "body down")}, fault: testkit.Fault{Ops: testkit.OpClaim}},
		{msgs: []consumer.Message{otelMsg("unrec", "m-unrecorded", "body unrec")}, fault: testkit.Fault{Ops: testkit.OpComplete}, ack: true},
		{msgs: []consumer.Message{otelMsg("b1", "m-batch-1", "body b1"), otelMsg("b2", "m-batch-2", "body b2")}, ack: true},
	}
	for _, d := range deliveries {
		if d.fault.Ops != 0 {
			store.Inject(d.fault)
		}
		if vs := adapter.Process(t.Context(), c, d.msgs, h, adapter.Waiting{}, nil); acked(vs) != d.ack {
			t.Errorf("message %s: verdicts %+v, want acknowledged: %v", d.msgs[0].ID, vs, d.ack)
		}
		store.Heal()
	}

	t.Run("metrics", func(t *testing.T) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(t.Context(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, dp := range findMetric[metricdata.Sum[int64]](t, rm, "idemq.consumer.messages").DataPoints {
			if g, _ := dp.Attributes.Value("group"); g.AsString() != otelGroup {
				t.Errorf("messages counted with group %q, want %q", g.AsString(), otelGroup)
			}
			out, _ := dp.Attributes.Value("outcome")
			got[out.AsString()] += dp.Value
		}
		s := c.Stats
		want := map[string]int64{
			dedupe.Completed.String():  3,
			dedupe.Suppressed.String(): 1,
			dedupe.Failed.String():     1,
			dedupe.InvalidKey.String(): 1,
			dedupe.Reused.String():     1,
			dedupe.Busy.String():       1,
			dedupe.StoreDown.String():  1,
			dedupe.Unrecorded.String(): 1,
		}
		if !maps.Equal(got, want) {
			t.Errorf("idemq.consumer.messages by outcome = %v, want %v", got, want)
		}
		// The same counts as Stats, counted in the same place.
		for out, n := range map[dedupe.Outcome]int64{
			dedupe.Completed: s().Completed, dedupe.Suppressed: s().Suppressed, dedupe.Failed: s().Failed,
			dedupe.InvalidKey: s().InvalidKey, dedupe.Reused: s().Reused, dedupe.Busy: s().Busy,
			dedupe.StoreDown: s().StoreDown, dedupe.Unrecorded: s().Unrecorded,
		} {
			if got[out.String()] != n {
				t.Errorf("counter %s = %d, Stats says %d", out, got[out.String()], n)
			}
		}

		// The store-down message waited (for a nanosecond) in the one
		// outage, which the next claim's answer closed.
		for name, n := range map[string]int64{"idemq.consumer.store.waits": s().StoreWaited, "idemq.consumer.store.outages": s().Outages} {
			var sum int64
			for _, dp := range findMetric[metricdata.Sum[int64]](t, rm, name).DataPoints {
				if g, _ := dp.Attributes.Value("group"); g.AsString() != otelGroup {
					t.Errorf("%s counted with group %q, want %q", name, g.AsString(), otelGroup)
				}
				sum += dp.Value
			}
			if sum != 1 || n != 1 {
				t.Errorf("%s = %d, Stats says %d; want 1", name, sum, n)
			}
		}

		claims := histogramCount(t, rm, "idemq.consumer.claim.duration")
		// One claim round per delivery with a key, the busy one's retry
		// after its wait at least.
		if claims < 9 {
			t.Errorf("claim latency samples = %d, want at least 9", claims)
		}
		// a, fail, unrec, b1, b2.
		if handlers := histogramCount(t, rm, "idemq.consumer.handler.duration"); handlers != 5 {
			t.Errorf("handler latency samples = %d, want 5", handlers)
		}
	})

	t.Run("spans", func(t *testing.T) {
		if started, ended := len(rec.Started()), len(rec.Ended()); started != ended {
			t.Errorf("%d spans started, %d ended", started, ended)
		}
		ended := rec.Ended()
		process := map[string]sdktrace.ReadOnlySpan{} // by message id
		for _, s := range ended {
			if s.SpanKind() == trace.SpanKindConsumer {
				id := attr(s, "messaging.message.id").AsString()
				if s.Name() != "process orders" {
					t.Errorf("message %s: span %q, want %q", id, s.Name(), "process orders")
				}
				process[id] = s
			}
		}
		children := func(p sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
			m := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range ended {
				if s.Parent().SpanID() == p.SpanContext().SpanID() {
					m[s.Name()] = s
				}
			}
			return m
		}
		ran := []string{"idemq.claim", "idemq.complete", "idemq.handler"}
		tests := []struct {
			id       string
			outcome  dedupe.Outcome
			children []string // sorted
			status   codes.Code
		}{
			{"m-completed", dedupe.Completed, ran, codes.Unset},
			{"m-suppressed", dedupe.Suppressed, nil, codes.Unset},
			{"m-failed", dedupe.Failed, []string{"idemq.claim", "idemq.handler", "idemq.release"}, codes.Error},
			{"m-invalid-key", dedupe.InvalidKey, nil, codes.Error},
			{"m-reused", dedupe.Reused, nil, codes.Error},
			{"m-busy", dedupe.Busy, nil, codes.Unset},
			{"m-store-down", dedupe.StoreDown, nil, codes.Error},
			{"m-unrecorded", dedupe.Unrecorded, ran, codes.Error},
			{"m-batch-1", dedupe.Completed, ran, codes.Unset},
			{"m-batch-2", dedupe.Completed, ran, codes.Unset},
		}
		for _, tt := range tests {
			t.Run(tt.id, func(t *testing.T) {
				p, ok := process[tt.id]
				if !ok {
					t.Fatalf("no process span; have %v", slices.Sorted(maps.Keys(process)))
				}
				if got := attr(p, "idemq.outcome").AsString(); got != tt.outcome.String() {
					t.Errorf("idemq.outcome = %q, want %q", got, tt.outcome)
				}
				if got := p.Status().Code; got != tt.status {
					t.Errorf("status = %v (%q), want %v", got, p.Status().Description, tt.status)
				}
				for k, want := range map[string]string{
					"messaging.system": "rocketmq", "messaging.destination.name": "orders",
					"messaging.consumer.group.name": otelGroup, "messaging.operation.type": "process",
				} {
					if got := attr(p, attribute.Key(k)).AsString(); got != want {
						t.Errorf("%s = %q, want %q", k, got, want)
					}
				}
				kids := children(p)
				if got := slices.Sorted(maps.Keys(kids)); !slices.Equal(got, tt.children) {
					t.Errorf("child spans %v, want %v", got, tt.children)
				}
				if h, ok := kids["idemq.handler"]; ok {
					mu.Lock()
					sc := inHandler[tt.id]
					mu.Unlock()
					if !sc.Equal(h.SpanContext()) {
						t.Errorf("the handler's context carries span %v, want its idemq.handler span %v", sc.SpanID(), h.SpanContext().SpanID())
					}
					wantStatus := codes.Unset
					if tt.outcome == dedupe.Failed {
						wantStatus = codes.Error
					}
					if h.Status().Code != wantStatus {
						t.Errorf("idemq.handler status = %v, want %v", h.Status().Code, wantStatus)
					}
				}
				if cs, ok := kids["idemq.complete"]; ok && tt.outcome == dedupe.Unrecorded && cs.Status().Code != codes.Error {
					t.Errorf("idemq.complete status = %v, want Error", cs.Status().Code)
				}
				for _, k := range kids {
					if k.StartTime().Before(p.StartTime()) || k.EndTime().After(p.EndTime()) {
						t.Errorf("child %s [%v, %v] outside its message's span [%v, %v]", k.Name(), k.StartTime(), k.EndTime(), p.StartTime(), p.EndTime())
					}
				}
			})
		}

		// A batch's messages share one claim round trip: their claim spans
		// are one interval.
		c1, c2 := children(process["m-batch-1"])["idemq.claim"], children(process["m-batch-2"])["idemq.claim"]
		if c1 != nil && c2 != nil && (!c1.StartTime().Equal(c2.StartTime()) || !c1.EndTime().Equal(c2.EndTime())) {
			t.Errorf("batch claim spans [%v, %v] and [%v, %v] differ", c1.StartTime(), c1.EndTime(), c2.StartTime(), c2.EndTime())
		}
		if got := attr(process["m-batch-1"], "messaging.batch.message_count").AsInt64(); got != 2 {
			t.Errorf("messaging.batch.message_count = %d, want 2", got)
		}
	})
}

// findMetric returns the data of the metric name in rm.
func findMetric[T metricdata.Aggregation](t *testing.T, rm metricdata.ResourceMetrics, name string) T {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				d, ok := m.Data.(T)
				if !ok {
					t.Fatalf("metric %s is a %T", name, m.Data)
				}
				return d
			}
		}
	}
	t.Fatalf("no metric %s", name)
	panic("unreachable")
}

// histogramCount returns how many samples the histogram name holds, all
// of the test's group.
func histogramCount(t *testing.T, rm metricdata.ResourceMetrics, name string) uint64 {
	t.Helper()
	var n uint64
	for _, dp := range findMetric[metricdata.Histogram[float64]](t, rm, name).DataPoints {
		if g, _ := dp.Attributes.Value("group"); g.AsString() != otelGroup {
			t.Errorf("%s recorded with group %q, want %q", name, g.AsString(), otelGroup)
		}
		if dp.Count > 0 && dp.Sum <= 0 {
			t.Errorf("%s: %d samples summing to %v", name, dp.Count, dp.Sum)
		}
		n += dp.Count
	}
	return n
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestTelemetryNoSDKAllocs checks that without an SDK the telemetry
// allocates nothing: a call of Process through the global providers, with none
// installed, allocates as much as one through no-op providers, which never
// reach the spans or the timing.
func TestTelemetryNoSDKAllocs(t *testing.T) {
	allocs := func(opts ...consumer.Option) float64 {
		opts = append(opts, consumer.WithLogger(slog.New(slog.DiscardHandler)))
		c, err := consumer.New(memdedupe.New(memdedupe.Config{}), otelGroup, opts...)
		if err != nil {
			t.Fatal(err)
		}
		// A failing handler: claim, handler and release, and no record
		// left to grow the store's map.
		h := func(context.Context, *consumer.Message) error { return errHandler }
		ms := []consumer.Message{otelMsg("k", "m", "body")}
		return testing.AllocsPerRun(200, func() { adapter.Process(context.Background(), c, ms, h, adapter.Waiting{}, nil) })
	}
	global := allocs()
	noop := allocs(consumer.WithTelemetry(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()))
	if global != noop {
		t.Errorf("Process allocates %v times through the unset global providers, %v through no-op ones", global, noop)
	}
}

// BenchmarkTelemetry measures Process of one fresh message on an
// in-memory store whose handler succeeds: without an SDK (the global
// providers, unset), with no-op providers, and with an SDK recording
// metrics, spans, or both (spans go to no exporter).
func BenchmarkTelemetry(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []consumer.Option
	}{
		{"global-unset", nil},
		{"noop", []consumer.Option{consumer.WithTelemetry(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider())}},
		{"sdk-metrics", []consumer.Option{consumer.WithTelemetry(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())), nil)}},
		{"sdk-traces", []consumer.Option{consumer.WithTelemetry(nil, sdktrace.NewTracerProvider())}},
		{"sdk-both", []consumer.Option{
			consumer.WithTelemetry(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
				sdktrace.NewTracerProvider()),
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			opts := append(bc.opts, consumer.WithLogger(slog.New(slog.DiscardHandler)))
			c, err := consumer.New(memdedupe.New(memdedupe.Config{}), otelGroup, opts...)
			if err != nil {
				b.Fatal(err)
			}
			h := func(context.Context, *consumer.Message) error { return nil }
			msgs := make([]consumer.Message, 4096)
			for i := range msgs {
				msgs[i] = otelMsg("k"+strconv.Itoa(i), "m", "body")
			}
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				if n == len(msgs) {
					// Fresh keys again: a new store, set up untimed.
					b.StopTimer()
					c, _ = consumer.New(memdedupe.New(memdedupe.Config{}), otelGroup, opts...)
					n = 0
					b.StartTimer()
				}
				if vs := adapter.Process(context.Background(), c, msgs[n:n+1], h, adapter.Waiting{}, nil); vs[0].Action != adapter.Ack {
					b.Fatalf("verdict %+v", vs[0])
				}
				n++
			}
		})
	}
}

// TestTelemetryTraceContext: a message's span is a child of the trace
// context its sender put in its properties when it is delivered alone, and
// links to it in a batch; one that cannot be read is ignored, with a debug
// log, and fails nothing.
func TestTelemetryTraceContext(t *testing.T) {
	old := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(old) })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c, logs := logged(t, memdedupe.New(memdedupe.Config{}), consumer.WithTelemetry(metricnoop.NewMeterProvider(), tp))
	sent := func(span byte) (consumer.Message, trace.SpanContext) {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7}, SpanID: trace.SpanID{span}, TraceFlags: trace.FlagsSampled, Remote: true})
		m := otelMsg("k"+strconv.Itoa(int(span)), "m"+strconv.Itoa(int(span)), "body")
		m.Properties["traceparent"] = "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		return m, sc
	}
	h := func(context.Context, *consumer.Message) error { return nil }
	process := func(ms ...consumer.Message) []sdktrace.ReadOnlySpan {
		rec.Reset()
		if vs := adapter.Process(t.Context(), c, ms, h, adapter.Waiting{}, nil); !acked(vs) {
			t.Fatalf("verdicts %+v", vs)
		}
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindConsumer {
				out = append(out, s)
			}
		}
		return out
	}

	m1, sc1 := sent(1)
	if spans := process(m1); len(spans) != 1 || !spans[0].Parent().Equal(sc1) || spans[0].SpanContext().TraceID() != sc1.TraceID() {
		t.Errorf("a message alone: spans %v, want one child of %v", spans, sc1)
	}

	m2, sc2 := sent(2)
	m3, sc3 := sent(3)
	spans := process(m2, m3)
	if len(spans) != 2 {
		t.Fatalf("a batch of two: %d spans", len(spans))
	}
	for i, want := range []trace.SpanContext{sc2, sc3} {
		if l := spans[i].Links(); len(l) != 1 || !l[0].SpanContext.Equal(want) || spans[i].Parent().IsValid() {
			t.Errorf("batch message %d: links %v, parent %v; want a link to %v and no parent", i, l, spans[i].Parent(), want)
		}
	}

	bad := otelMsg("bad", "m-bad", "body")
	bad.Properties["traceparent"] = "00-not-a-trace-01"
	logs.Take()
	if spans := process(bad); len(spans) != 1 || spans[0].Parent().IsValid() {
		t.Errorf("an unreadable trace context: spans %v, want one without a parent", spans)
	}
	var debug int
	for _, r := range logs.Take() {
		if r.Level == slog.LevelDebug && strings.Contains(r.Message, "trace context") {
			debug++
		}
	}
	if debug != 1 {
		t.Errorf("%d debug records of the unreadable trace context, want 1", debug)
	}
}

// untraced is a store that keeps no completion's trace, as SQL's.
type untraced struct{ dedupe.Store }

func (s untraced) Claim(ctx context.Context, items []dedupe.Item, lease time.Duration) ([]dedupe.ClaimResult, []error, error) {
	res, errs, err := s.Store.Claim(ctx, items, lease)
	for i := range res {
		res[i].Trace = ""
	}
	return res, errs, err
}

// TestTelemetryDuplicateLink checks the attributes of a message's span and
// that a suppressed duplicate's span links to the span of the run that
// applied the effect, named in the dedupe record or by the batch's earlier
// copy, with the relation as the link's attribute; and that a store that
// keeps no trace gives no link.
func TestTelemetryDuplicateLink(t *testing.T) {
	tests := []struct {
		name  string
		store dedupe.Store
		// together delivers the copy in the same batch as the first.
		together bool
		wantLink bool
	}{
		{"Redelivered", memdedupe.New(memdedupe.Config{}), false, true},
		{"SameBatch", memdedupe.New(memdedupe.Config{}), true, true},
		{"SameBatchUntraced", untraced{memdedupe.New(memdedupe.Config{})}, true, true},
		{"StoreKeepsNone", untraced{memdedupe.New(memdedupe.Config{})}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			c := newConsumer(t, tt.store, consumer.WithTelemetry(metricnoop.NewMeterProvider(), tp))
			first, copied := otelMsg("k", "m1", "body"), otelMsg("k", "m2", "body")
			first.Keys, first.Tag = []string{"k", "order-42"}, "created"
			h := func(context.Context, *consumer.Message) error { return nil }
			batches := [][]consumer.Message{{first}, {copied}}
			if tt.together {
				batches = [][]consumer.Message{{first, copied}}
			}
			for _, b := range batches {
				if vs := adapter.Process(t.Context(), c, b, h, adapter.Waiting{}, nil); !acked(vs) {
					t.Fatalf("verdicts %+v", vs)
				}
			}
			spans := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindConsumer {
					spans[attrOf(s, "messaging.message.id").AsString()] = s
				}
			}
			applied, dup := spans["m1"], spans["m2"]
			if applied == nil || dup == nil {
				t.Fatalf("spans %v, want m1's and m2's", spans)
			}
			for key, want := range map[string]attribute.Value{
				"messaging.system":                attribute.StringValue("rocketmq"),
				"messaging.operation.type":        attribute.StringValue("process"),
				"messaging.destination.name":      attribute.StringValue("orders"),
				"messaging.consumer.group.name":   attribute.StringValue(testGroup),
				"messaging.rocketmq.message.keys": attribute.StringSliceValue([]string{"k", "order-42"}),
				"messaging.rocketmq.message.tag":  attribute.StringValue("created"),
				"idemq.key":                       attribute.StringValue("k"),
				"idemq.outcome":                   attribute.StringValue("completed"),
			} {
				if got := attrOf(applied, key); got != want {
					t.Errorf("m1's %s = %v, want %v", key, got.Emit(), want.Emit())
				}
			}
			if got := attrOf(dup, "messaging.rocketmq.message.tag"); got.Type() != attribute.INVALID {
				t.Errorf("m2, untagged, has tag %v", got.Emit())
			}
			if got := attrOf(dup, "idemq.outcome").AsString(); got != "suppressed" {
				t.Fatalf("m2's outcome %q, want suppressed", got)
			}
			links := dup.Links()
			switch {
			case !tt.wantLink && len(links) != 0:
				t.Errorf("m2's links %v, want none", links)
			case tt.wantLink && (len(links) != 1 || links[0].SpanContext.TraceID() != applied.SpanContext().TraceID() || links[0].SpanContext.SpanID() != applied.SpanContext().SpanID() ||
				!slices.Contains(links[0].Attributes, attribute.String("idemq.link", "applied"))):
				t.Errorf("m2's links %v, want one to m1's span %v with idemq.link=applied", links, applied.SpanContext())
			}
		})
	}
}

// attrOf is s's attribute key, of type INVALID when s has none.
func attrOf(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestTelemetrySystem checks that a span names the messaging system the
// adapter gives, and carries RocketMQ's own attributes for RocketMQ only.
func TestTelemetrySystem(t *testing.T) {
	for _, tt := range []struct{ system, want string }{{"", "rocketmq"}, {"kafka", "kafka"}, {"nats", "nats"}} {
		t.Run(tt.want, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			c := newConsumer(t, memdedupe.New(memdedupe.Config{}), consumer.WithTelemetry(metricnoop.NewMeterProvider(), tp))
			m := otelMsg("k", "m1", "body")
			m.Keys, m.Tag = []string{"k"}, "created"
			h := func(context.Context, *consumer.Message) error { return nil }
			if vs := adapter.Process(t.Context(), c, []consumer.Message{m}, h, adapter.Waiting{System: tt.system}, nil); !acked(vs) {
				t.Fatalf("verdicts %+v", vs)
			}
			var ended []sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindConsumer {
					ended = append(ended, s)
				}
			}
			if len(ended) != 1 {
				t.Fatalf("%d message spans, want 1", len(ended))
			}
			if got := attrOf(ended[0], "messaging.system").AsString(); got != tt.want {
				t.Errorf("messaging.system %q, want %q", got, tt.want)
			}
			rocketmq := tt.want == "rocketmq"
			for _, key := range []string{"messaging.rocketmq.message.keys", "messaging.rocketmq.message.tag"} {
				if has := attrOf(ended[0], key).Type() != attribute.INVALID; has != rocketmq {
					t.Errorf("%s set: %v, want %v", key, has, rocketmq)
				}
			}
		})
	}
}
