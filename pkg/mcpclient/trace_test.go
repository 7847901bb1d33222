package mcpclient_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpbus/mcpbus/pkg/tracing"
	"github.com/mcpbus/mcpbus/pkg/tracing/tracingtest"
)

// TestStdioCallCarriesTraceparentInMeta: with tracing on, a stdio call made
// under a span sends the span's traceparent as _meta.traceparent; a call
// without a span sends none. Not parallel: it installs the process's
// tracer provider and removes it before the parallel tests run.
func TestStdioCallCarriesTraceparentInMeta(t *testing.T) {
	shutdown, err := tracing.Setup(context.Background(), tracing.Options{Enabled: true, Endpoint: tracingtest.NewReceiver(t).URL, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	c := metaClient(t)
	ctx, span := tracing.Start(context.Background(), "call")
	defer span.End()
	res, err := c.CallTool(ctx, "meta", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Traceparent string `json:"traceparent"`
	}
	if err := json.Unmarshal(res.StructuredContent, &meta); err != nil {
		t.Fatal(err)
	}
	sc := trace.SpanContextFromContext(ctx)
	if !strings.Contains(meta.Traceparent, sc.TraceID().String()) || !strings.Contains(meta.Traceparent, sc.SpanID().String()) {
		t.Errorf("_meta.traceparent = %q, want the call's span %s/%s", meta.Traceparent, sc.TraceID(), sc.SpanID())
	}
	onlyProtocolMeta(t, "a call without a span", call(t, c, "meta", "", nil).StructuredContent)
}
