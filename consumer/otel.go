package consumer

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemq/idemq/dedupe"
	"github.com/idemq/idemq/internal/tracectx"
)

// The Consumer reports through the OpenTelemetry API only, which records
// nothing until the application installs an SDK: the library never links
// one, and meanwhile its instruments cost a few atomic loads per message
// and no allocation.
//
// Metrics, under the meter github.com/idemq/idemq/consumer:
//
//   - idemq.consumer.messages (counter): messages by outcome, counted where
//     the decision table decides (attributes outcome, the
//     [dedupe.Outcome]'s name, and group); the same counts as [Stats];
//   - idemq.consumer.claim.duration (histogram, seconds): one sample per
//     claim round trip, which a delivered batch's messages share;
//   - idemq.consumer.handler.duration (histogram, seconds): one sample per
//     handler run (attribute group);
//   - idemq.consumer.store.waits (counter): messages that waited in process
//     for the dedupe store to answer again, once per delivery (attribute
//     group; [Stats.StoreWaited]);
//   - idemq.consumer.store.outages (counter): times the store stopped
//     answering claims (attribute group; [Stats.Outages]).
//
// Spans, under the tracer of the same name: one span per message, as the
// OpenTelemetry messaging conventions have a consumer do and as a user of
// Jaeger or Tempo looks for — "process <topic>", of kind Consumer, from
// delivery to decision, with the message's attributes and its outcome,
// and an error status when the message was not processed or its effect
// may have been doubled. A span per message rather than one per callback,
// so that a batch's messages can be found by id and key, each with its own
// outcome; events would hide the phases' latencies in a log panel, so the
// message span has child spans instead, where its handler ran:
// idemq.claim (the claim round trip), idemq.handler (the handler's
// context carries it, so the spans the handler starts nest under it) and
// idemq.complete or idemq.release (the settling round trip). A message
// whose handler did not run (suppressed, busy, ...) has no children: its
// span is the claim. A suppressed duplicate's span links to the span of
// the run that applied the effect (attribute idemq.link=applied), which
// the dedupe record names where the store keeps it ([dedupe.Ticket]'s
// Trace): what a user looking at the duplicate wants next.
const instrumentationName = "github.com/idemq/idemq/consumer"

// Span attribute keys only the consumer sets, the messaging conventions'
// and idemq's; internal/tracectx owns those it shares with the send spans.
const (
	attrGroup   = attribute.Key("messaging.consumer.group.name")
	attrKey     = attribute.Key("idemq.key")
	attrOutcome = attribute.Key("idemq.outcome")
	// attrLink names what a span link of idemq's points to.
	attrLink = attribute.Key("idemq.link")
)

// linkApplied is the relation of a suppressed duplicate's span to the
// span of the run that applied its effect.
var linkApplied = attrLink.String("applied")

// durationBuckets are the histograms' bucket boundaries in seconds, from a
// claim on a local Redis to a slow handler; the SDK's default ones are
// meant for milliseconds. A view overrides them.
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

type telemetryOptions struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

// WithTelemetry reports the Consumer's metrics to mp and its spans to tp.
// A nil one, and the default, is the global provider
// (otel.GetMeterProvider, otel.GetTracerProvider), which records nothing
// until the application installs an SDK with otel.SetMeterProvider or
// otel.SetTracerProvider, before or after [New].
func WithTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.telemetry = telemetryOptions{meters: mp, tracers: tp} })
}

// observer holds a Consumer's instruments, created once in [New], and the
// attribute sets they record with, one per outcome, so that recording
// builds nothing per message.
type observer struct {
	group     string
	messages  metric.Int64Counter
	claimed   metric.Float64Histogram
	handled   metric.Float64Histogram
	waits     metric.Int64Counter
	outages   metric.Int64Counter
	byOutcome [len(decisions)][]metric.AddOption
	inGroup   []metric.RecordOption
	// addInGroup is inGroup for counters.
	addInGroup []metric.AddOption

	tracer trace.Tracer // nil: spans are never recorded
	// unset is otel's global provider while no SDK is installed, when the
	// tracer comes from it, else nil.
	unset trace.TracerProvider
}

func newObserver(t telemetryOptions, group string) (*observer, error) {
	if t.meters == nil {
		t.meters = otel.GetMeterProvider()
	}
	if t.tracers == nil {
		t.tracers = otel.GetTracerProvider()
	}
	ob := &observer{group: group}
	m := t.meters.Meter(instrumentationName)
	var err error
	if ob.messages, err = m.Int64Counter("idemq.consumer.messages", metric.WithUnit("{message}"),
		metric.WithDescription("Messages delivered to the consumer, by the outcome that decided what became of them.")); err != nil {
		return nil, err
	}
	if ob.claimed, err = m.Float64Histogram("idemq.consumer.claim.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a claim round trip to the dedupe store, shared by the messages of a delivered batch."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if ob.handled, err = m.Float64Histogram("idemq.consumer.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a handler run."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, err
	}
	if ob.waits, err = m.Int64Counter("idemq.consumer.store.waits", metric.WithUnit("{message}"),
		metric.WithDescription("Messages that waited in process for the dedupe store to answer again, once per delivery.")); err != nil {
		return nil, err
	}
	if ob.outages, err = m.Int64Counter("idemq.consumer.store.outages", metric.WithUnit("{outage}"),
		metric.WithDescription("Times the dedupe store stopped answering claims.")); err != nil {
		return nil, err
	}
	for out, d := range decisions {
		if d.count == nil {
			continue // no outcome
		}
		set := attribute.NewSet(attribute.String("outcome", dedupe.Outcome(out).String()), attribute.String("group", group))
		ob.byOutcome[out] = []metric.AddOption{metric.WithAttributeSet(set)}
	}
	inGroup := metric.WithAttributeSet(attribute.NewSet(attribute.String("group", group)))
	ob.inGroup = []metric.RecordOption{inGroup}
	ob.addInGroup = []metric.AddOption{inGroup}

	if _, off := t.tracers.(noop.TracerProvider); !off {
		ob.tracer = t.tracers.Tracer(instrumentationName)
		if tracectx.Unset(t.tracers) {
			ob.unset = t.tracers
		}
	}
	return ob, nil
}

// tracing reports whether spans may be recorded now. While the global
// provider has no SDK behind it, it makes no span at all rather than
// non-recording ones, so that the path without an SDK allocates nothing.
// (The price: otel's eBPF auto-instrumentation, which records through the
// unset global, sees no idemq spans.)
func (ob *observer) tracing() bool {
	return ob.tracer != nil && (ob.unset == nil || otel.GetTracerProvider() != ob.unset)
}

// count adds a message decided as out to the messages counter.
func (ob *observer) count(ctx context.Context, out dedupe.Outcome) {
	ob.messages.Add(ctx, 1, ob.byOutcome[out]...)
}

// delivery observes one callback's messages: their spans and the timing of
// the guard's rounds. A nil *delivery observes nothing: that is the path
// when neither spans nor latencies are recorded (the messages are still
// counted, in decide). Its methods run in the callback's goroutine only:
// [dedupe.Guard.Do] runs fn there, one item after the other.
type delivery struct {
	ob    *observer
	timed bool         // latencies are recorded
	spans []trace.Span // per message; nil when not tracing
	// settles are, per message whose handler ran under a claim, the span
	// of the round trip that settled it.
	settles []settle
	round   round // the guard's current round
}

// round is one call of [dedupe.Guard.Do]: a claim round trip, the handlers
// of the messages acquired and a settling round trip.
type round struct {
	start    time.Time
	claimEnd time.Time // the first handler's start; zero until then
	last     time.Time // the last handler's end
	ran      []int     // the messages whose handler ran under a claim
}

type settle struct {
	ran        bool
	failed     bool // the handler failed: release, else complete
	start, end time.Time
}

// observe starts observing the delivery of msgs, or returns nil when
// nothing would be recorded.
func (c *Consumer) observe(ctx context.Context, msgs []Message, keys []string, system string) *delivery {
	ob := c.obs
	tracing := ob.tracing()
	timed := ob.claimed.Enabled(ctx) || ob.handled.Enabled(ctx)
	if !tracing && !timed {
		return nil
	}
	d := &delivery{ob: ob, timed: timed}
	if tracing {
		c.startSpans(ctx, d, msgs, keys, system)
	}
	return d
}

// startSpans starts the spans of msgs. Apart from observe, whose frame
// would otherwise hold its attributes on every callback's stack, traced or
// not: rocketmq-client-go runs each callback on a fresh goroutine, whose
// stack grows, at a copy, when frames are large.
func (c *Consumer) startSpans(ctx context.Context, d *delivery, msgs []Message, keys []string, system string) {
	ob := d.ob
	rocketmq := system == ""
	if rocketmq {
		system = "rocketmq"
	}
	d.spans = make([]trace.Span, len(msgs))
	d.settles = make([]settle, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		attrs := []attribute.KeyValue{
			tracectx.AttrSystem.String(system),
			tracectx.AttrOpType.String("process"),
			tracectx.AttrOpName.String("process"),
			tracectx.AttrTopic.String(m.Topic),
			attrGroup.String(ob.group),
			tracectx.AttrMsgID.String(m.ID),
			tracectx.AttrBodySize.Int(len(m.Body)),
			attrKey.String(keys[i]),
		}
		if rocketmq && len(m.Keys) > 0 {
			attrs = append(attrs, tracectx.AttrKeys.StringSlice(m.Keys))
		}
		if rocketmq && m.Tag != "" {
			attrs = append(attrs, tracectx.AttrTag.String(m.Tag))
		}
		if len(msgs) > 1 {
			attrs = append(attrs, tracectx.AttrBatch.Int(len(msgs)))
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
		// The sender's trace context, carried in the message: the parent of
		// a message delivered alone, a link of each of a batch (as the
		// OpenTelemetry messaging conventions have it).
		parent := ctx
		switch sent, unreadable := tracectx.Extract(ctx, m.GetProperty); {
		case unreadable:
			c.logger.Debug("idemq: trace context in the message unreadable; ignored", "group", ob.group, "msgId", m.ID, tracectx.Parent, m.GetProperty(tracectx.Parent))
		case sent == ctx:
			// Nothing carried.
		case len(msgs) == 1:
			parent = sent
		default:
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: trace.SpanContextFromContext(sent)}))
		}
		_, d.spans[i] = ob.tracer.Start(parent, "process "+m.Topic, opts...)
	}
}

// name gives each item, of message of[j], its message span's context as
// its Trace, which the store keeps with the completion, so that a later
// duplicate's span can link to the run that applied the effect.
func (d *delivery) name(items []dedupe.Item, of []int) {
	if d == nil || d.spans == nil {
		return
	}
	for j := range items {
		items[j].Trace = tracectx.Format(d.spans[of[j]].SpanContext())
	}
}

// do is g.Do(ctx, items, fn), timed as one round; fn must call d.run.
func (d *delivery) do(ctx context.Context, g *dedupe.Guard, items []dedupe.Item, fn func(context.Context, int) error) []dedupe.Result {
	if d == nil {
		return g.Do(ctx, items, fn)
	}
	if len(d.spans) == 1 {
		// The store's spans, if its client makes any, nest under the
		// message's.
		ctx = trace.ContextWithSpan(ctx, d.spans[0])
	}
	d.round = round{start: time.Now(), ran: d.round.ran[:0]}
	res := g.Do(ctx, items, fn)
	end := time.Now()
	if d.round.claimEnd.IsZero() && d.timed {
		// No handler ran: the round was the claim.
		d.ob.claimed.Record(ctx, end.Sub(d.round.start).Seconds(), d.ob.inGroup...)
	}
	for _, i := range d.round.ran {
		d.settles[i].start, d.settles[i].end = d.round.last, end
	}
	return res
}

// run runs run(ctx, i), message i's handler, as the guard's fn: it ends
// the round's claim and times the handler, under a span of its own.
func (d *delivery) run(ctx context.Context, i int, run func(context.Context, int) error) error {
	if d == nil {
		return safeRun(ctx, run, i)
	}
	start := time.Now()
	if d.round.claimEnd.IsZero() {
		d.round.claimEnd = start
		if d.timed {
			d.ob.claimed.Record(ctx, start.Sub(d.round.start).Seconds(), d.ob.inGroup...)
		}
	}
	var span trace.Span
	if d.spans != nil {
		ctx = trace.ContextWithSpan(ctx, d.spans[i])
		t, _, _ := dedupe.ClaimFromContext(ctx)
		claimed := t.Token != ""
		if claimed {
			_, cs := d.ob.tracer.Start(ctx, "idemq.claim", trace.WithTimestamp(d.round.start))
			cs.End(trace.WithTimestamp(d.round.claimEnd))
		}
		ctx, span = d.ob.tracer.Start(ctx, "idemq.handler", trace.WithTimestamp(start))
		d.settles[i] = settle{ran: claimed}
		if claimed {
			d.round.ran = append(d.round.ran, i)
		}
	}
	err := safeRun(ctx, run, i)
	end := time.Now()
	d.round.last = end
	if d.timed {
		d.ob.handled.Record(ctx, end.Sub(start).Seconds(), d.ob.inGroup...)
	}
	if span != nil {
		if err != nil {
			d.settles[i].failed = true
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(end))
	}
	return err
}

// finish ends the messages' spans with the outcomes decided, res.
func (d *delivery) finish(res []dedupe.Result) {
	if d == nil || d.spans == nil {
		return
	}
	for i, span := range d.spans {
		r := res[i]
		if s := d.settles[i]; s.ran {
			name := "idemq.complete"
			if s.failed {
				name = "idemq.release"
			}
			ctx := trace.ContextWithSpan(context.Background(), span)
			_, ss := d.ob.tracer.Start(ctx, name, trace.WithTimestamp(s.start))
			if r.Outcome == dedupe.LeaseLost || r.Outcome == dedupe.Unrecorded {
				ss.SetStatus(codes.Error, describe(r))
			}
			ss.End(trace.WithTimestamp(s.end))
		}
		span.SetAttributes(attrOutcome.String(r.Outcome.String()))
		if sc, ok := tracectx.Parse(r.Trace); ok && r.Outcome == dedupe.Suppressed {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{linkApplied}})
		}
		if decisions[r.Outcome].failed {
			span.SetAttributes(tracectx.AttrError.String(r.Outcome.String()))
			span.SetStatus(codes.Error, describe(r))
		}
		span.End()
	}
}

// describe is r's error for a span's status, or its outcome without one.
func describe(r dedupe.Result) string {
	if r.Err != nil {
		return r.Err.Error()
	}
	return r.Outcome.String()
}
