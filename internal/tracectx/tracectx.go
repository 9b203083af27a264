// Package tracectx carries W3C trace context in a message's properties,
// through the OpenTelemetry propagator the program configures
// (otel.SetTextMapPropagator; none by default, and then nothing is
// carried). The properties are named as the propagator names its fields,
// traceparent and tracestate, as OpenTelemetry's Java RocketMQ
// instrumentation puts them, so that a trace crosses languages. It also
// makes the outbox senders' send spans ([StartSend]), and names a run in a
// dedupe record ([Format], [Parse]).
package tracectx

import (
	"context"
	"encoding/hex"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Parent is the property of the W3C trace context's parent.
const Parent = "traceparent"

// carrier is a message's properties as a propagation.TextMapCarrier.
type carrier struct {
	get func(name string) string
	set func(name, value string)
}

func (c carrier) Get(key string) string { return c.get(key) }

func (c carrier) Set(key, value string) {
	if c.set != nil {
		c.set(key, value)
	}
}

// Keys lists nothing: the W3C propagators ask for their fields by name.
func (carrier) Keys() []string { return nil }

// Inject writes ctx's trace context into a message's properties, read with
// get and written with set, unless they hold one already: a message sent
// again keeps the context of its first send, as it keeps its key.
func Inject(ctx context.Context, get func(name string) string, set func(name, value string)) {
	if get(Parent) != "" || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	otel.GetTextMapPropagator().Inject(ctx, carrier{get: get, set: set})
}

// Extract returns ctx with the remote span context of a message's
// properties, read with get, and reports whether they held a trace
// context that could not be read (which is then ignored).
func Extract(ctx context.Context, get func(name string) string) (_ context.Context, unreadable bool) {
	p := otel.GetTextMapPropagator()
	if get(Parent) == "" || !slices.Contains(p.Fields(), Parent) {
		// Nothing carried, or a program that propagates no trace context.
		return ctx, false
	}
	out := p.Extract(ctx, carrier{get: get})
	sc := trace.SpanContextFromContext(out)
	return out, !sc.IsValid() || !sc.IsRemote()
}

// Format is sc as a W3C traceparent, the form in which a run is named in
// a dedupe record ([dedupe.Ticket]'s Trace), or "" when sc is not valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// Parse is the span context of the traceparent s, as Format writes it; ok
// is false, and the context invalid, when s is not one.
func Parse(s string) (_ trace.SpanContext, ok bool) {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(s[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(s[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(s[53:])); err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}
