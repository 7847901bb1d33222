package tracing

import (
	"context"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every mcpbus span.
const Scope = "github.com/mcpbus/mcpbus"

// current is the tracer of the provider Setup installed last (a
// trace.Tracer; unset until then: the Start functions check active first).
var current atomic.Value

// tracer returns the installed provider's tracer.
func tracer() trace.Tracer { return current.Load().(trace.Tracer) }

// active is set while a provider Setup installed runs, so the hot paths
// (every NATS request) skip even building a span name when tracing is off.
var active atomic.Bool

// Active reports whether Setup installed a tracer provider that is still
// running.
func Active() bool { return active.Load() }

// StartNATS starts the span of one NATS request on subject: kind
// trace.SpanKindClient on the requester ("send <subject>"),
// trace.SpanKindServer on the responder ("process <subject>"). While
// tracing is off it allocates nothing and returns ctx with a no-op span.
func StartNATS(ctx context.Context, kind trace.SpanKind, subject string) (context.Context, trace.Span) {
	if !active.Load() {
		return ctx, noop.Span{}
	}
	name := "send " + subject
	if kind == trace.SpanKindServer {
		name = "process " + subject
	}
	return tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(KeySubject.String(subject)))
}

// Attribute keys of mcpbus spans. Values are names and codes only.
const (
	KeyServer        = attribute.Key("mcpbus.server")
	KeyTool          = attribute.Key("mcpbus.tool")
	KeyTransport     = attribute.Key("mcpbus.transport")
	KeyOutcome       = attribute.Key("mcpbus.outcome")
	KeySessionReused = attribute.Key("mcpbus.session_reused")
	KeyTaskID        = attribute.Key("mcpbus.task_id")
	KeyGrantType     = attribute.Key("mcpbus.oauth.grant_type")
	KeySubject       = attribute.Key("messaging.destination.name")
	KeyMCPMethod     = attribute.Key("mcp.method.name")
)

// OutcomeOK is the outcome of a span that ended without an error.
const OutcomeOK = "ok"

// Server, Tool and Transport are the attributes naming an upstream call.
func Server(name string) attribute.KeyValue        { return KeyServer.String(name) }
func Tool(name string) attribute.KeyValue          { return KeyTool.String(name) }
func TransportKind(kind string) attribute.KeyValue { return KeyTransport.String(kind) }

// SessionReused says whether a call ran on a pooled session.
func SessionReused(v bool) attribute.KeyValue { return KeySessionReused.Bool(v) }

// Start starts a span named name (internal kind) with attrs, a child of
// ctx's span. While tracing is off it returns ctx and a no-op span.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !active.Load() {
		return ctx, noop.Span{}
	}
	// The clone keeps attrs from escaping, so a caller's attributes cost
	// nothing while tracing is off.
	return tracer().Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// StartLinked starts a new root span (its own trace) named name with
// attrs, linked to the span of traceparent, such as a task poll linked to
// the task's submit; an empty or malformed traceparent gives an unlinked
// root. While tracing is off it returns ctx and a no-op span.
func StartLinked(ctx context.Context, name, traceparent string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !active.Load() {
		return ctx, noop.Span{}
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(slices.Clone(attrs)...)}
	if sc := SpanContextOf(traceparent); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return tracer().Start(ctx, name, opts...)
}

// SetAttributes adds attrs to ctx's span (nothing while it is not
// recording).
func SetAttributes(ctx context.Context, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrs...)
	}
}

// End ends span with its outcome: OutcomeOK for a nil err, else code (an
// mcpbus error code such as upstream_error) and an error status whose
// description is the code too: error messages may quote what a caller or
// an upstream sent, so they stay out of spans.
func End(span trace.Span, err error, code string) {
	if span.IsRecording() {
		if err == nil {
			span.SetAttributes(KeyOutcome.String(OutcomeOK))
		} else {
			span.SetAttributes(KeyOutcome.String(code))
			span.SetStatus(codes.Error, code)
		}
	}
	span.End()
}

// WithSpanOf returns base carrying from's span, so work detached from a
// request (a flight shared by concurrent callers that outlives the first
// one, on its own context) still joins the trace of the caller that
// started it. While tracing is off, or without a span in from, it is base.
func WithSpanOf(base, from context.Context) context.Context {
	if !active.Load() {
		return base
	}
	if span := trace.SpanFromContext(from); span.SpanContext().IsValid() {
		return trace.ContextWithSpan(base, span)
	}
	return base
}
