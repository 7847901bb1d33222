package observability_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpbus/mcpbus/pkg/observability"
)

// TestLoggerDropsURLCredentials: whatever a service logs, a URL in it loses
// its userinfo and query string, in text and JSON output alike.
func TestLoggerDropsURLCredentials(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log := observability.NewLogger(&buf, "info", format).With("base", "nats://user:pw-SEKRET@nats:4222")
		log.Info("cannot reach https://h/x?api_key=q-SEKRET", observability.Err(errors.New(`Post "https://u-SEKRET:p@h/mcp?token=t-SEKRET": refused`)), "url", "https://h/sse?k=k-SEKRET")
		out := buf.String()
		if strings.Contains(out, "SEKRET") || !strings.Contains(out, "https://h/mcp") || !strings.Contains(out, "nats://nats:4222") {
			t.Errorf("%s: %s", format, out)
		}
	}
}

// TestLoggerAddsTraceID: a line logged with a context that carries a span
// names its trace and span; one without has neither key.
func TestLoggerAddsTraceID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := observability.NewLogger(&buf, "info", "json").With("service", "x")
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	log.InfoContext(ctx, "request served")
	log.Info("background")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	if !strings.Contains(lines[0], `"trace_id":"0af7651916cd43dd8448eb211c80319c"`) || !strings.Contains(lines[0], `"span_id":"b7ad6b7169203331"`) {
		t.Errorf("traced line: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced line: %s", lines[1])
	}
}
