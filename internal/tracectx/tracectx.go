// Package tracectx carries W3C trace context in a message's properties,
// through the OpenTelemetry propagator the program configures
// (otel.SetTextMapPropagator; none by default, and then nothing is
// carried). The properties are named as the propagator names its fields,
// traceparent and tracestate, as OpenTelemetry's Java RocketMQ
// instrumentation puts them, so that a trace crosses languages.
package tracectx

import (
	"context"
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
