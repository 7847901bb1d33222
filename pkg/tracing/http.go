package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// StartHTTP starts the server span of an incoming HTTP request, under the
// trace context its headers carry, named "<method> <route>" where route is
// the route template (never the raw path or query: they may carry ids and
// keys). End it with EndHTTP. While tracing is off it returns r's context
// and a no-op span.
func StartHTTP(r *http.Request, route string) (context.Context, trace.Span) {
	ctx := r.Context()
	if !active.Load() {
		return ctx, noop.Span{}
	}
	ctx = ExtractHTTP(ctx, r.Header)
	return tracer().Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", r.Method), attribute.String("http.route", route)))
}

// EndHTTP ends an HTTP server span with the response status (5xx marks it
// failed, as the HTTP conventions say for servers).
func EndHTTP(span trace.Span, status int) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// StartMCP starts the span of one MCP JSON-RPC request (method such as
// tools/call), a child of ctx's span. While tracing is off it returns ctx
// and a no-op span.
func StartMCP(ctx context.Context, method string) (context.Context, trace.Span) {
	if !active.Load() {
		return ctx, noop.Span{}
	}
	return tracer().Start(ctx, "mcp "+method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(KeyMCPMethod.String(method)))
}
