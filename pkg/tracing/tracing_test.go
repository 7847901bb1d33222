package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpbus/mcpbus/pkg/tracing"
	"github.com/mcpbus/mcpbus/pkg/tracing/tracingtest"
)

// The tests share OpenTelemetry's process-wide provider, so they run one
// after the other in one function: off first, then on.
func TestTracing(t *testing.T) {
	for _, v := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_TRACES_SAMPLER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(v, "")
	}
	upstream := make(chan http.Header, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstream <- r.Header.Clone() }))
	defer srv.Close()
	get := func(ctx context.Context) http.Header {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := (&http.Client{Transport: tracing.Transport(nil)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-upstream
	}

	t.Run("off", func(t *testing.T) {
		shutdown, err := tracing.Setup(context.Background(), tracing.Options{Enabled: false, Endpoint: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		defer shutdown(context.Background())
		if tracing.Active() {
			t.Fatal("tracing is active although it is off")
		}
		ctx, span := tracing.Start(context.Background(), "x")
		if span.IsRecording() || trace.SpanContextFromContext(ctx).IsValid() {
			t.Error("a span records while tracing is off")
		}
		span.End()
		// No cost: the hot paths allocate nothing while off.
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		if n := testing.AllocsPerRun(100, func() {
			c, s := tracing.StartNATS(ctx, trace.SpanKindClient, "mcpbus.tools.call")
			tracing.End(s, nil, "")
			_, s = tracing.StartHTTP(req, "/api/mcp/tools")
			tracing.EndHTTP(s, 200)
			_, s = tracing.Start(c, "tool call", tracing.Server("srv"), tracing.Tool("t"))
			tracing.End(s, nil, "")
		}); n != 0 {
			t.Errorf("%v allocations per request while tracing is off", n)
		}
		h := map[string][]string{}
		tracing.Inject(ctx, h)
		if len(h) != 0 || tracing.Traceparent(ctx) != "" {
			t.Errorf("trace context sent while off: %v", h)
		}
		// A caller's traceparent is not forwarded either: nothing is
		// extracted while off.
		in := tracing.Extract(context.Background(), map[string][]string{"traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
		if hdr := get(in); hdr.Get("traceparent") != "" {
			t.Errorf("upstream got traceparent %q while tracing is off", hdr.Get("traceparent"))
		}
	})

	t.Run("environment", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_EXPORTER", "none")
		if (tracing.Options{Enabled: true}).On() {
			t.Error("OTEL_TRACES_EXPORTER=none does not turn tracing off")
		}
		t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
		if !(tracing.Options{}).On() {
			t.Error("OTEL_TRACES_EXPORTER=otlp does not turn tracing on")
		}
		t.Setenv("OTEL_SDK_DISABLED", "true")
		if (tracing.Options{Enabled: true}).On() {
			t.Error("OTEL_SDK_DISABLED=true does not turn tracing off")
		}
	})

	t.Run("grpc", testGRPC)

	t.Run("on", func(t *testing.T) {
		rcv := tracingtest.NewReceiver(t)
		shutdown, err := tracing.Setup(context.Background(), tracing.Options{Enabled: true, Endpoint: rcv.URL, SampleRatio: 1, Service: "mcpbus-test"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, root := tracing.Start(context.Background(), "root", tracing.Server("srv"))
		h := map[string][]string{}
		tracing.Inject(ctx, h)
		tp := tracing.Traceparent(ctx)
		if len(h["traceparent"]) != 1 || h["traceparent"][0] != tp || !strings.Contains(tp, root.SpanContext().TraceID().String()) {
			t.Fatalf("header %v, traceparent %q", h, tp)
		}
		// The responder's side continues the trace.
		_, child := tracing.Start(tracing.Extract(context.Background(), h), "child")
		if child.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Error("extracted context is not the requester's trace")
		}
		child.End()
		if got := get(ctx).Get("traceparent"); got != tp {
			t.Errorf("upstream traceparent %q, want %q", got, tp)
		}
		// A caller's malformed traceparent starts a fresh trace, and its
		// baggage and junk headers are not forwarded anywhere.
		in := http.Header{"Traceparent": {"00-zzzz\r\nX-Injected: 1-b7ad6b7169203331-01"}, "Baggage": {"k=SEKRET"}}
		bad := tracing.ExtractHTTP(context.Background(), in)
		if trace.SpanContextFromContext(bad).IsValid() {
			t.Error("a malformed traceparent was accepted")
		}
		badCtx, badSpan := tracing.Start(bad, "fresh")
		out := map[string][]string{}
		tracing.Inject(badCtx, out)
		if len(out) != 1 || len(out["traceparent"]) != 1 || strings.Contains(strings.Join(out["traceparent"], ""), "zzzz") {
			t.Errorf("forwarded headers after a malformed traceparent and baggage: %v", out)
		}
		badSpan.End()
		_, poll := tracing.StartLinked(ctx, "poll", tp)
		if poll.SpanContext().TraceID() == root.SpanContext().TraceID() {
			t.Error("a linked span joined the trace instead of starting its own")
		}
		poll.End()
		tracing.End(root, nil, "")
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if tracing.Active() {
			t.Error("still active after shutdown")
		}
		spans := rcv.Wait(t, time.Minute, "four spans", func(s []tracingtest.Span) bool { return len(s) == 4 })
		byName := map[string]tracingtest.Span{}
		for _, s := range spans {
			byName[s.Name] = s
		}
		r, c, p := byName["root"], byName["child"], byName["poll"]
		if r.Service != "mcpbus-test" || r.Attrs["mcpbus.server"] != "srv" || r.Attrs["mcpbus.outcome"] != "ok" {
			t.Errorf("root %+v", r)
		}
		if c.ParentID != r.SpanID || c.TraceID != r.TraceID {
			t.Errorf("child %+v is not under root %+v", c, r)
		}
		if p.ParentID != "" || len(p.Links) != 1 || p.Links[0] != r.TraceID {
			t.Errorf("poll %+v is not a root linked to %s", p, r.TraceID)
		}
	})
}
