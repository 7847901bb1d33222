package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func TestConfigChangesNamesWithoutValues(t *testing.T) {
	t.Parallel()
	before := `{"mcpServers": {"a": {"command": "npx", "env": {"K": "old-SEKRET"}}, "b": {"url": "https://h/x", "enabled": true},
		"c": {"command": "uvx"}}, "mcpInterceptors": ["request_logger"], "skills": {"x": 1}}`
	after := `{"mcpServers": {"a": {"command": "npx", "env": {"K": "new-SEKRET", "J": "j"}}, "b": {"url": "https://h/x", "enabled": false},
		"d": {"command": "npx"}}, "mcpInterceptors": [], "skills": {"x": 1}}`
	got := audit.ConfigChanges([]byte(before), []byte(after))
	want := []audit.Change{
		{Server: "a", Op: "changed", Keys: []string{"env.J", "env.K"}},
		{Server: "b", Op: "disabled"},
		{Server: "c", Op: "removed"},
		{Server: "d", Op: "added"},
		{Op: "changed", Keys: []string{"mcpInterceptors"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changes = %+v\nwant %+v", got, want)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), "SEKRET") {
		t.Errorf("a change holds a value: %s", b)
	}
	if c := audit.ConfigChanges(nil, []byte(`{"mcpServers": {"a": {"command": "npx"}}}`)); fmt.Sprint(c) != fmt.Sprint([]audit.Change{{Server: "a", Op: "added"}}) {
		t.Errorf("from nothing: %+v", c)
	}
	if c := audit.ConfigChanges([]byte(before), []byte(before)); len(c) != 0 {
		t.Errorf("no change: %+v", c)
	}
}

func TestCaptureMasksAndCaps(t *testing.T) {
	t.Parallel()
	args := `{"q": "find val-SEKRET-1", "nested": {"password": "pw", "list": [{"apiKey": "k"}, "plain"]}, "n": 3}`
	out, cut := audit.Capture(json.RawMessage(args), 1024, "val-SEKRET-1")
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || cut {
		t.Fatalf("capture %s: %v %v", out, err, cut)
	}
	if v["q"] != "find ***" || fmt.Sprint(v["nested"]) != "map[list:[map[apiKey:***] plain] password:***]" || v["n"] != float64(3) {
		t.Errorf("captured %s", out)
	}
	out, cut = audit.Capture(json.RawMessage(`{"q": "`+strings.Repeat("é", 200)+`"}`), 64)
	var s string
	if err := json.Unmarshal(out, &s); err != nil || !cut || len(s) > 64 {
		t.Errorf("capped: %s %v (%d bytes)", out, cut, len(s))
	}
	if out, _ := audit.Capture(json.RawMessage(`not json`), 64); out != nil {
		t.Errorf("invalid arguments captured: %s", out)
	}
}

// A record written with a span in its context carries the span's trace id
// and the context's request id.
func TestWriteTakesTraceAndRequestIDFromContext(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	w, err := audit.NewWriter(context.Background(), b.Connect(t), b.Names, audit.WriterOptions{Settings: config.DefaultAudit()})
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	ctx = bus.WithRequestID(ctx, "req-7")
	w.Write(ctx, audit.Record{Kind: audit.KindCall, User: "u", Tool: "t", Outcome: "ok"})
	w.Write(context.Background(), audit.Record{Kind: audit.KindCall, User: "u", Tool: "t", Outcome: "ok"})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := audit.Read(context.Background(), b.JS, b.Names, audit.Filter{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	if recs[0].TraceID != tid.String() || recs[0].RequestID != "req-7" || recs[1].TraceID != "" || recs[1].RequestID != "" {
		t.Errorf("records = %+v", recs)
	}
}
