package tracectx

import (
	"context"
	"reflect"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Unset reports whether tp is otel's global provider before an SDK is
// installed: its tracers make spans that record nothing, yet cost
// allocations, until otel.SetTracerProvider gives them a delegate.
func Unset(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	return t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// Tracing reports whether the global provider may record spans now: an
// SDK is installed. A sender asks before it builds anything for a span,
// so that a send without an SDK costs no allocation.
func Tracing() bool {
	tp := otel.GetTracerProvider()
	if _, off := tp.(noop.TracerProvider); off {
		return false
	}
	return !Unset(tp)
}

// Message is what a send span tells of one message, and how its
// properties are read and written.
type Message struct {
	Get func(name string) string
	Set func(name, value string)
	// Keys, Tag, BodySize: the message's.
	Keys     []string
	Tag      string
	BodySize int
	// Ordered says the message is sent in the order of its ordering key,
	// which goes as its Group (a 5.x message group) when Group is set.
	Ordered bool
	Group   string
}

// Span attribute keys, as the OpenTelemetry messaging conventions name
// them: a send span's, and those a consumer's span shares.
const (
	AttrSystem   = attribute.Key("messaging.system")
	AttrOpType   = attribute.Key("messaging.operation.type")
	AttrOpName   = attribute.Key("messaging.operation.name")
	AttrTopic    = attribute.Key("messaging.destination.name")
	AttrBatch    = attribute.Key("messaging.batch.message_count")
	AttrKeys     = attribute.Key("messaging.rocketmq.message.keys")
	AttrTag      = attribute.Key("messaging.rocketmq.message.tag")
	attrType     = attribute.Key("messaging.rocketmq.message.type")
	attrGroup    = attribute.Key("messaging.rocketmq.message.group")
	AttrBodySize = attribute.Key("messaging.message.body.size")
	AttrMsgID    = attribute.Key("messaging.message.id")
	AttrError    = attribute.Key("error.type")
)

// StartSend starts the span of a send of msgs to topic, under the global
// provider's tracer of scope, and returns ctx with it; call it when
// [Tracing]. The span follows the OpenTelemetry messaging conventions
// for a "send" span:
//
//   - it links to each message's creation context, the trace context the
//     message carries (an outbox row's, taken at Add);
//   - its parent is ctx's span if ctx has one, else the creation context
//     when the messages carry one only (a row of one transaction, the
//     common case), so that the send shows in the trace of the
//     transaction that wrote the row; else it starts a trace;
//   - a message that carries no creation context gets the span's, which
//     then is its creation context: the span is then of kind Producer,
//     else Client, as the conventions have a send span whose context
//     is not a creation context be.
//
// system is the messaging system as the conventions name it ("kafka",
// "nats"); "" is "rocketmq", whose particular attributes (keys, tag,
// message type and group) go on its spans only.
func StartSend(ctx context.Context, scope, system, topic string, msgs []Message) (context.Context, trace.Span) {
	var (
		links   []trace.Link
		created trace.SpanContext
		several bool
	)
	bare := 0 // messages that carry no creation context
	for _, m := range msgs {
		if m.Get(Parent) == "" {
			bare++
			continue
		}
		sent, unreadable := Extract(ctx, m.Get)
		if unreadable || sent == ctx {
			continue // ignored, as a consumer ignores it
		}
		sc := trace.SpanContextFromContext(sent)
		links = append(links, trace.Link{SpanContext: sc})
		if created.IsValid() && !created.Equal(sc) {
			several = true
		}
		created = sc
	}
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() && created.IsValid() && !several {
		parent = trace.ContextWithRemoteSpanContext(ctx, created)
	}
	kind := trace.SpanKindClient
	if bare > 0 && slices.Contains(otel.GetTextMapPropagator().Fields(), Parent) {
		kind = trace.SpanKindProducer
	} else {
		bare = 0
	}
	rocketmq := system == ""
	if rocketmq {
		system = "rocketmq"
	}
	attrs := []attribute.KeyValue{
		AttrSystem.String(system),
		AttrOpType.String("send"),
		AttrOpName.String("send"),
		AttrTopic.String(topic),
	}
	if len(msgs) > 1 {
		attrs = append(attrs, AttrBatch.Int(len(msgs)))
	}
	if len(msgs) == 1 && rocketmq {
		m := msgs[0]
		if len(m.Keys) > 0 {
			attrs = append(attrs, AttrKeys.StringSlice(m.Keys))
		}
		if m.Tag != "" {
			attrs = append(attrs, AttrTag.String(m.Tag))
		}
		if m.Ordered {
			attrs = append(attrs, attrType.String("fifo"))
		} else {
			attrs = append(attrs, attrType.String("normal"))
		}
		if m.Group != "" {
			attrs = append(attrs, attrGroup.String(m.Group))
		}
	}
	if len(msgs) == 1 {
		attrs = append(attrs, AttrBodySize.Int(msgs[0].BodySize))
	}
	ctx, span := otel.GetTracerProvider().Tracer(scope).Start(parent, "send "+topic,
		trace.WithSpanKind(kind), trace.WithLinks(links...), trace.WithAttributes(attrs...))
	if bare > 0 {
		for _, m := range msgs {
			Inject(ctx, m.Get, m.Set)
		}
	}
	return ctx, span
}

// EndSend ends span, a send's, with the message id the broker answered
// (for a send of one message; "" if none) or the send's error, whose type
// errType names (a low-cardinality name: "refused", "failed").
func EndSend(span trace.Span, id string, err error, errType string) {
	if id != "" {
		span.SetAttributes(AttrMsgID.String(id))
	}
	if err != nil {
		span.RecordError(err)
		span.SetAttributes(AttrError.String(errType))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
