package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A call moves the call counter and the latency histogram of its server and
// tool; a tool error, a failing upstream and an unknown tool each count
// under their outcome, the last two as errors by code; the stdio pool's
// size and spawns follow the session. A tool name the catalog does not know
// never becomes a label value.
func TestCallMetricsMove(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	reg := metrics.NewRegistry()
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), metrics: metrics.NewToolcall(reg)})
	calls := func(tool, transport, outcome, server string) float64 {
		return metricstest.Value(t, reg, "mcpbus_toolcall_calls_total", map[string]string{"server": server, "tool": tool, "transport": transport, "outcome": outcome})
	}

	e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if n := calls("fake_echo", "stdio", "ok", "fake"); n != 1 {
		t.Errorf("calls{fake_echo, ok} = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_call_duration_seconds", map[string]string{"server": "fake", "tool": "fake_echo"}); n != 1 {
		t.Errorf("duration samples = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_stdio_sessions", nil); n != 1 {
		t.Errorf("stdio sessions = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_session_spawns_total", map[string]string{"transport": "stdio"}); n != 1 {
		t.Errorf("spawns = %v, want 1", n)
	}

	if r := e.mustCall(t, bus.Call{Tool: "fake_fail"}); !r.IsError {
		t.Fatalf("fake_fail: %+v", r)
	}
	if n := calls("fake_fail", "stdio", "tool_error", "fake"); n != 1 {
		t.Errorf("calls{fake_fail, tool_error} = %v, want 1", n)
	}

	// A failing upstream: the process exits mid-call.
	if _, err := e.call(t, bus.Call{Tool: "fake_crash", ThreadID: "crash"}); err == nil {
		t.Fatal("fake_crash succeeded")
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_errors_total", map[string]string{"server": "fake", "code": "upstream_error"}); n != 1 {
		t.Errorf("errors{fake, upstream_error} = %v, want 1", n)
	}
	if n := calls("fake_crash", "stdio", "upstream_error", "fake"); n != 1 {
		t.Errorf("calls{fake_crash, upstream_error} = %v, want 1", n)
	}

	for i := range 3 {
		if _, err := e.call(t, bus.Call{Tool: fmt.Sprintf("no_such_tool_%d", i)}); err == nil {
			t.Fatal("unknown tool succeeded")
		}
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_errors_total", map[string]string{"server": "none", "code": "not_found"}); n != 3 {
		t.Errorf("errors{none, not_found} = %v, want 3", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "no_such_tool") {
					t.Errorf("%s has the caller's tool name as a label: %v", f.GetName(), m.GetLabel())
				}
			}
		}
	}
}

// auditMessages returns the raw bodies of every audit record in b's stream.
func auditMessages(t *testing.T, b *testkit.Bus) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := b.JS.OrderedConsumer(ctx, b.Names.AuditStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for range info.NumPending {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, msg.Subject()+" "+string(msg.Data())+fmt.Sprint(msg.Headers()))
	}
	return out
}

// waitRecords reads the call records of the stream until there are n.
func waitRecords(t *testing.T, b *testkit.Bus, n int) []audit.Record {
	t.Helper()
	var recs []audit.Record
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d audit records", n), func() bool {
		var err error
		recs, err = audit.Read(context.Background(), b.JS, b.Names, audit.Filter{Kind: audit.KindCall})
		if err != nil {
			t.Fatal(err)
		}
		return len(recs) >= n
	})
	return recs
}

// One record per call, success and error, with who, what, where, outcome,
// size and duration; none of the call's secret header, context secret or
// argument values reach the stream (the raw messages are grepped).
func TestAuditRecordsCalls(t *testing.T) {
	t.Parallel()
	const (
		headerSecret = "hdr-SEKRET-81f3"
		ctxSecret    = "ctx-SEKRET-92a4"
		argValue     = "arg-VALUE-a7c1"
	)
	f := newHTTPFake(t, false)
	web := httpServerJSON(f.URL, fmt.Sprintf(`"headers": {"X-Api-Key": %q}, "headers_from_context": {"headers": {"X-Tenant": "tenant"}}`, headerSecret))
	settings := config.DefaultAudit()
	e := startWith(t, options{cfg: cfgOf(map[string]string{"web": web}, ""), catalog: fakeTools("web"), audit: &settings})

	ctx := bus.WithRequestID(context.Background(), "req-audit-1")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ok, err := bus.Request[bus.ToolsCallReply](cctx, e.bus.NC, e.bus.Names.ToolsCall(), bus.Call{
		Tool: "web_echo", UserID: "alice", ThreadID: "t1", Arguments: json.RawMessage(`{"message":"` + argValue + `"}`),
		Context: &bus.CallContext{Secrets: map[string]string{"tenant": ctxSecret}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.call(t, bus.Call{Tool: "web_missing", UserID: "bob", ThreadID: "t2", Arguments: json.RawMessage(`{"message":"` + argValue + `"}`)}); err == nil {
		t.Fatal("web_missing succeeded")
	}

	recs := waitRecords(t, e.bus, 2)
	if len(recs) != 2 {
		t.Fatalf("records = %+v, want 2", recs)
	}
	got, bad := recs[0], recs[1]
	if got.User != "alice" || got.Thread != "t1" || got.Tool != "web_echo" || got.Server != "web" || got.Transport != "http" ||
		got.Outcome != "ok" || got.RequestID != "req-audit-1" || got.ResultBytes == 0 || got.DurationMS <= 0 || got.Time.IsZero() {
		t.Errorf("success record = %+v", got)
	}
	if want := len(text(t, ok)); got.ResultBytes < want {
		t.Errorf("result_bytes = %d, want at least %d", got.ResultBytes, want)
	}
	if bad.User != "bob" || bad.Tool != "web_missing" || bad.Outcome != "not_found" || bad.Server != "" {
		t.Errorf("error record = %+v", bad)
	}
	if got.Arguments != nil || bad.Arguments != nil {
		t.Errorf("arguments recorded without the opt-in: %s / %s", got.Arguments, bad.Arguments)
	}
	// The filters: by user and by tool.
	if rs, err := audit.Read(context.Background(), e.bus.JS, e.bus.Names, audit.Filter{User: "bob"}); err != nil || len(rs) != 1 || rs[0].User != "bob" {
		t.Errorf("user filter: %+v, %v", rs, err)
	}
	if rs, err := audit.Read(context.Background(), e.bus.JS, e.bus.Names, audit.Filter{Tool: "web_echo"}); err != nil || len(rs) != 1 || rs[0].Tool != "web_echo" {
		t.Errorf("tool filter: %+v, %v", rs, err)
	}
	for _, m := range auditMessages(t, e.bus) {
		for _, secret := range []string{headerSecret, ctxSecret, argValue} {
			if strings.Contains(m, secret) {
				t.Errorf("audit stream holds %q: %s", secret, m)
			}
		}
	}
}

// With audit.capture_arguments the record keeps the arguments, masked: a
// secret-named key's value, the call's context secrets and the server's
// header values become ***; the rest stays, cut to max_argument_bytes.
func TestAuditCapturesMaskedArguments(t *testing.T) {
	t.Parallel()
	const (
		headerSecret = "hdr-SEKRET-55b0"
		ctxSecret    = "ctx-SEKRET-66c1"
		keySecret    = "key-SEKRET-77d2"
	)
	f := newHTTPFake(t, false)
	web := httpServerJSON(f.URL, fmt.Sprintf(`"headers": {"X-Api-Key": %q}, "headers_from_context": {"headers": {"X-Tenant": "tenant"}}`, headerSecret))
	settings := config.DefaultAudit()
	settings.CaptureArguments, settings.MaxArgumentBytes = true, 256
	e := startWith(t, options{cfg: cfgOf(map[string]string{"web": web}, ""), catalog: fakeTools("web"), audit: &settings})
	args := fmt.Sprintf(`{"message":"visible words %s and %s","api_key":%q}`, ctxSecret, headerSecret, keySecret)
	e.mustCall(t, bus.Call{Tool: "web_echo", UserID: "alice", Arguments: json.RawMessage(args),
		Context: &bus.CallContext{Secrets: map[string]string{"tenant": ctxSecret}}})
	long := `{"message":"` + strings.Repeat("x", 600) + `"}`
	e.mustCall(t, bus.Call{Tool: "web_echo", UserID: "alice", Arguments: json.RawMessage(long),
		Context: &bus.CallContext{Secrets: map[string]string{"tenant": ctxSecret}}})

	recs := waitRecords(t, e.bus, 2)
	// The two records may reach the stream in either order: the short
	// call's is the one not truncated.
	if recs[0].ArgumentsTruncated {
		recs[0], recs[1] = recs[1], recs[0]
	}
	var a map[string]string
	if err := json.Unmarshal(recs[0].Arguments, &a); err != nil {
		t.Fatalf("arguments %s: %v", recs[0].Arguments, err)
	}
	if a["api_key"] != "***" || a["message"] != "visible words *** and ***" || recs[0].ArgumentsTruncated {
		t.Errorf("captured arguments = %s", recs[0].Arguments)
	}
	if !recs[1].ArgumentsTruncated || len(recs[1].Arguments) > 256+16 {
		t.Errorf("long arguments: truncated %v, %d bytes", recs[1].ArgumentsTruncated, len(recs[1].Arguments))
	}
	for _, m := range auditMessages(t, e.bus) {
		for _, secret := range []string{headerSecret, ctxSecret, keySecret} {
			if strings.Contains(m, secret) {
				t.Errorf("audit stream holds %q: %s", secret, m)
			}
		}
	}
}

// Personal connections have one runtime name per user and definition, so
// their calls are labelled server="personal", tool="personal": however many
// users and connections there are, they add no label values.
func TestPersonalCallsDoNotGrowLabels(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	e, a := startPersonalWith(t, options{cfg: emptyConfig, metrics: metrics.NewToolcall(reg)}, nil)
	f := newHTTPFake(t, false)
	var runtimes []string
	for _, user := range []string{"alice", "bob", "carol"} {
		web := a.put(t, user, "web", httpServerJSON(f.URL, ""))
		runtimes = append(runtimes, web)
		e.mustCall(t, bus.Call{Tool: web + "_echo", Arguments: json.RawMessage(`{"message":"hi"}`), UserID: user})
	}
	if n := metricstest.Value(t, reg, "mcpbus_toolcall_calls_total", map[string]string{"server": "personal", "tool": "personal", "transport": "http", "outcome": "ok"}); n != 3 {
		t.Errorf("calls{personal} = %v, want 3", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, rt := range runtimes {
					if strings.Contains(l.GetValue(), rt) {
						t.Errorf("%s has a personal runtime name as a label: %v", fam.GetName(), m.GetLabel())
					}
				}
				for _, user := range []string{"alice", "bob", "carol"} {
					if l.GetValue() == user {
						t.Errorf("%s has a user id as a label: %v", fam.GetName(), m.GetLabel())
					}
				}
			}
		}
	}
}
