package observability

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Keys of the trace attributes TraceHandler adds.
const (
	KeyTraceID = "trace_id"
	KeySpanID  = "span_id"
)

// TraceHandler adds trace_id and span_id to every record logged with a
// context that carries a span (log.InfoContext(ctx, …)), so the lines of
// one request share its trace id. Without a span (tracing off, or a
// background loop) records pass unchanged.
func TraceHandler(next slog.Handler) slog.Handler { return traceHandler{next} }

type traceHandler struct{ next slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(KeyTraceID, sc.TraceID().String()), slog.String(KeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.next.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.next.WithGroup(name)}
}
