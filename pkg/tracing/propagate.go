package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceparent is the W3C trace-context header (and _meta key).
const HeaderTraceparent = "traceparent"

// Header is a NATS message header (nats.Header and micro.Headers share
// this shape). Its keys are case-sensitive; the W3C keys are lower case.
type Header = map[string][]string

// headerCarrier adapts a NATS header to the propagator.
type headerCarrier Header

func (h headerCarrier) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h headerCarrier) Set(key, value string) { h[key] = []string{value} }

func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes ctx's trace context (traceparent, tracestate) into h, a
// non-nil NATS header. Nothing is written while tracing is off.
func Inject(ctx context.Context, h Header) {
	otel.GetTextMapPropagator().Inject(ctx, headerCarrier(h))
}

// Extract returns ctx carrying the remote trace context of h, if any.
func Extract(ctx context.Context, h Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, headerCarrier(h))
}

// Traceparent is the W3C traceparent of ctx's span, "" when tracing is off
// or ctx has no span.
func Traceparent(ctx context.Context) string {
	if !active.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	m := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, m)
	return m[HeaderTraceparent]
}

// SpanContextOf parses a traceparent ("" or malformed: an invalid span
// context).
func SpanContextOf(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{HeaderTraceparent: traceparent})
	return trace.SpanContextFromContext(ctx)
}

// Transport returns base (http.DefaultTransport when nil) sending each
// request's trace context as traceparent/tracestate headers, so an
// upstream sees the trace of the call it serves. While tracing is off, or
// for a request without a span, requests pass through untouched.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !active.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return t.base.RoundTrip(req)
	}
	m := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, m)
	if len(m) == 0 {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not modify the caller's request.
	out := req.Clone(ctx)
	for k, v := range m {
		out.Header.Set(k, v)
	}
	return t.base.RoundTrip(out)
}

// Unwrap returns the wrapped transport (for callers that look for their
// own transport underneath).
func (t *transport) Unwrap() http.RoundTripper { return t.base }

// ExtractHTTP returns ctx carrying the trace context of an incoming HTTP
// request's headers.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
}
