package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/pkg/tracing/tracingtest"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

// upstreamCall is one JSON-RPC request an upstream received.
type upstreamCall struct {
	method, tool, traceparent, authorization string
}

// recordingProxy fronts the demo HTTP server and records, for every
// JSON-RPC request, its method, tool and the trace and auth headers.
type recordingProxy struct {
	mu    sync.Mutex
	calls []upstreamCall
}

func (p *recordingProxy) handler(target string) http.Handler {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method != "" {
			p.mu.Lock()
			p.calls = append(p.calls, upstreamCall{m.Method, m.Params.Name, r.Header.Get("traceparent"), r.Header.Get("Authorization")})
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	})
}

// callsOf returns the tools/call requests of tool.
func (p *recordingProxy) callsOf(tool string) []upstreamCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []upstreamCall
	for _, c := range p.calls {
		if c.method == "tools/call" && c.tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// traceOf is the trace id of a traceparent header ("" when malformed).
func traceOf(tp string) string {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}

// TestTracingAcrossFiveProcesses runs the five services as processes with
// tracing on, exporting over OTLP/HTTP to an in-test receiver, and makes
// one REST call, one NATS call, one MCP call and one durable task through
// an OAuth (refresh_token) upstream. Each request is one connected trace from the
// api (or the NATS caller) through toolcall and tokens to the upstream,
// which sees a traceparent of that trace; each task poll is its own trace
// linked to the submit's; no secret is in any exported span.
func TestTracingAcrossFiveProcesses(t *testing.T) {
	t.Parallel()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dbURL := testSchema(t)
	dir := t.TempDir()
	rcv := tracingtest.NewReceiver(t)
	ep := tokentest.New(t, tokentest.Options{})
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}

	demoPort := freePort(t)
	demo := startProcess(t, dir, "demo-http", demoBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", demoPort))
	proxy := &recordingProxy{}
	upstream := httptest.NewServer(proxy.handler(fmt.Sprintf("http://127.0.0.1:%d", demoPort)))
	defer upstream.Close()

	const headerSecret = "hdr-SEKRET-5f1c2a"
	o := ep.Options()
	ext := fmt.Sprintf(`{"mcpServers": {"secure": {"type": "http", "url": %q,
		"headers": {"X-Upstream-Key": %q},
		"oauth": {"token_url": %q, "grant_type": "refresh_token", "client_id": %q, "client_secret": %q, "refresh_token": %q},
		"task_toolsets": [{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}}}`,
		upstream.URL+"/mcp", headerSecret, ep.URL, o.ClientID, o.ClientSecret, o.RefreshToken)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	settings := natsSettings(natsURL, names) + fmt.Sprintf("database:\n  backend: postgres\n  url: %q\napi:\n  listen: %s\nworkspace:\n  root: %s\n"+
		"mcp_tasks:\n  enabled: true\n  poll_interval_seconds: 1\nobservability:\n  tracing:\n    enabled: true\n    endpoint: %s\n",
		dbURL, apiAddr, filepath.Join(dir, "ws"), rcv.URL)
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"MCPBUS_NATS_NAMESPACE=", "MCPBUS_CREDENTIALS_KEY=" + key, "DEER_FLOW_CREDENTIALS_KEY=",
		// Export every 100 ms instead of every 5 s; nothing else of the
		// runner's OpenTelemetry environment applies.
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_ENDPOINT=",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=",
		"OTEL_TRACES_SAMPLER=", "OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES="}
	procs := map[string]*process{}
	for _, svc := range []string{"tokens", "discovery", "toolcall", "taskpoller", "api"} {
		procs[svc] = startProcessEnv(t, dir, svc, env, mcpbusBin, "serve", svc)
	}
	base := "http://" + apiAddr
	testkit.Eventually(t, 60*time.Second, "the api to list the OAuth server's tools", func() bool {
		resp, err := http.Get(base + "/api/mcp/tools")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body map[string]any
		return json.NewDecoder(resp.Body).Decode(&body) == nil && slices.Contains(toolNames(body), "secure_echo")
	})
	waitHealthy(t, natsURL, names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI)

	// What must never be exported: the OAuth client secret and refresh
	// token, every access token the endpoint issued, the credentials key,
	// the static header value, and the calls' arguments (which the echo
	// tool also returns as its result).
	const restArg, natsArg, mcpArg, taskArg = "rest-arg-SEKRET-91b7", "nats-arg-SEKRET-3e0d", "mcp-arg-SEKRET-77d2", "task-arg-SEKRET-c44a"

	// 1. REST.
	status, body := httpJSON(t, "POST", base+"/api/mcp/tools/secure_echo/call", `{"arguments":{"message":"`+restArg+`"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), restArg) {
		t.Fatalf("REST call: %d %v", status, body)
	}
	calls := proxy.callsOf("echo")
	if len(calls) != 1 || traceOf(calls[0].traceparent) == "" || !strings.HasPrefix(calls[0].authorization, "Bearer ") {
		t.Fatalf("the upstream's echo calls: %+v", calls)
	}
	restTrace := traceOf(calls[0].traceparent)
	spans := rcv.Wait(t, 60*time.Second, "the REST call's trace through api, toolcall and tokens", func(s []tracingtest.Span) bool {
		tr := tracingtest.Trace(s, restTrace)
		// Each process exports in its own batches: wait for the whole tree.
		return hasServices(tr, "mcpbus-api", "mcpbus-toolcall", "mcpbus-tokens") &&
			hasSpan(tr, "mcpbus-api", "POST /api/mcp/tools/:name/call") && hasSpan(tr, "mcpbus-toolcall", "tool call") &&
			connected(tr, "")
	})
	rest := tracingtest.Trace(spans, restTrace)
	checkConnected(t, "REST call", rest, "")
	tc := findSpan(rest, "mcpbus-toolcall", "tool call")
	if tc == nil || tc.Attrs["mcpbus.server"] != "secure" || tc.Attrs["mcpbus.tool"] != "echo" || tc.Attrs["mcpbus.transport"] != "http" ||
		tc.Attrs["mcpbus.outcome"] != "ok" || tc.Attrs["mcpbus.session_reused"] == "" {
		t.Errorf("tool call span: %+v", tc)
	}
	// The upstream's traceparent names the tool call's span (the HTTP
	// request is made under it).
	if tc != nil && !strings.Contains(calls[0].traceparent, tc.SpanID) {
		t.Errorf("upstream traceparent %s is not under the tool call span %s", calls[0].traceparent, tc.SpanID)
	}
	// The api's log line for the request carries its trace id.
	testkit.Eventually(t, 10*time.Second, "the api's request log line with the trace id", func() bool {
		for _, line := range strings.Split(procs["api"].out.String(), "\n") {
			if strings.Contains(line, "request served") && strings.Contains(line, "trace_id="+restTrace) {
				return true
			}
		}
		return false
	})
	// The token endpoint's refresh (made for discovery, before the call)
	// has its span in the tokens service.
	spans = rcv.Wait(t, 60*time.Second, "the tokens refresh and discovery spans", func(s []tracingtest.Span) bool {
		return hasSpan(s, "mcpbus-tokens", "oauth token refresh") && hasSpan(s, "mcpbus-discovery", "discover server")
	})
	if !hasSpan(spans, "mcpbus-tokens", "oauth token refresh") {
		t.Errorf("no oauth token refresh span:\n%s", tracingtest.Format(spans))
	}
	if !hasSpan(spans, "mcpbus-discovery", "discover server") {
		t.Errorf("no discover server span:\n%s", tracingtest.Format(spans))
	}

	// 2. NATS, as an agent worker with its own tracing calls: its
	// traceparent is the parent of everything mcpbus does for the call.
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const natsTrace, natsParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	msg := nats.NewMsg(names.ToolsCall())
	msg.Header.Set("traceparent", "00-"+natsTrace+"-"+natsParent+"-01")
	msg.Data, _ = json.Marshal(bus.Call{Tool: "secure_echo", Arguments: json.RawMessage(`{"message":"` + natsArg + `"}`), UserID: "agent-1", ThreadID: "t-nats"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	cancel()
	if err != nil || !strings.Contains(string(reply.Data), natsArg) {
		t.Fatalf("NATS call: %v %s", err, reply.Data)
	}
	if calls = proxy.callsOf("echo"); len(calls) != 2 || traceOf(calls[1].traceparent) != natsTrace {
		t.Fatalf("the upstream's echo calls: %+v", calls)
	}
	spans = rcv.Wait(t, 60*time.Second, "the NATS call's trace", func(s []tracingtest.Span) bool {
		tr := tracingtest.Trace(s, natsTrace)
		return hasSpan(tr, "mcpbus-toolcall", "tool call") && connected(tr, natsParent)
	})
	checkConnected(t, "NATS call", tracingtest.Trace(spans, natsTrace), natsParent)

	// 2b. MCP: a tools/call on the aggregated endpoint is one trace too,
	// with a span for the JSON-RPC request under the HTTP one.
	tr, err := transport.NewStreamableHTTP(base + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	mc := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	defer mc.Close()
	if err := mc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	initialized(t, mc, mcp.ProtocolVersion20251125)
	if text, isErr := callText(t, mc, "secure_echo", map[string]any{"message": mcpArg}); isErr || text != mcpArg {
		t.Fatalf("MCP call: %q %v", text, isErr)
	}
	if calls = proxy.callsOf("echo"); len(calls) != 3 || traceOf(calls[2].traceparent) == "" {
		t.Fatalf("the upstream's echo calls: %+v", calls)
	}
	mcpTrace := traceOf(calls[2].traceparent)
	spans = rcv.Wait(t, 60*time.Second, "the MCP call's trace", func(s []tracingtest.Span) bool {
		tr := tracingtest.Trace(s, mcpTrace)
		return hasSpan(tr, "mcpbus-api", "POST /mcp") && hasSpan(tr, "mcpbus-api", "mcp tools/call") && hasSpan(tr, "mcpbus-toolcall", "tool call") &&
			connected(tr, "")
	})
	checkConnected(t, "MCP call", tracingtest.Trace(spans, mcpTrace), "")
	if sp := findSpan(tracingtest.Trace(spans, mcpTrace), "mcpbus-toolcall", "tool call"); sp == nil || sp.Attrs["mcpbus.session_reused"] != `{"boolValue":true}` {
		t.Errorf("the third call's tool call span did not reuse the session: %+v", sp)
	}

	// 3. A durable task: the submit is the REST request's trace; every poll
	// is a trace of its own, linked to the submit's, reaching the upstream.
	thread := fmt.Sprintf("trace-%d", time.Now().UnixNano())
	status, body = httpJSON(t, "POST", base+"/api/mcp/tools/secure_submit_report/call",
		`{"arguments":{"topic":"`+taskArg+`","steps":2},"thread_id":"`+thread+`"}`)
	task, _ := body["task"].(map[string]any)
	taskID, _ := task["task_id"].(string)
	if status != 200 || task["status"] != "submitted" {
		t.Fatalf("submit: %d %v", status, body)
	}
	submits := proxy.callsOf("submit_report")
	if len(submits) != 1 || traceOf(submits[0].traceparent) == "" {
		t.Fatalf("the upstream's submit calls: %+v", submits)
	}
	submitTrace := traceOf(submits[0].traceparent)
	testkit.Eventually(t, 60*time.Second, "the task to complete", func() bool {
		_, detail := httpJSON(t, "GET", base+"/api/threads/"+thread+"/mcp-tasks/"+taskID, "")
		return detail["status"] == "completed"
	})
	polls := proxy.callsOf("get_report_status")
	if len(polls) == 0 {
		t.Fatal("the upstream saw no status call")
	}
	pollTrace := traceOf(polls[0].traceparent)
	if pollTrace == "" || pollTrace == submitTrace {
		t.Fatalf("status call traceparent %q (submit trace %s)", polls[0].traceparent, submitTrace)
	}
	spans = rcv.Wait(t, 60*time.Second, "the submit's trace and the first poll's", func(s []tracingtest.Span) bool {
		return hasServices(tracingtest.Trace(s, submitTrace), "mcpbus-api", "mcpbus-toolcall") &&
			hasSpan(tracingtest.Trace(s, pollTrace), "mcpbus-taskpoller", "task poll") &&
			hasSpan(tracingtest.Trace(s, pollTrace), "mcpbus-toolcall", "tool call") &&
			connected(tracingtest.Trace(s, submitTrace), "") && connected(tracingtest.Trace(s, pollTrace), "")
	})
	checkConnected(t, "task submit", tracingtest.Trace(spans, submitTrace), "")
	checkConnected(t, "task poll", tracingtest.Trace(spans, pollTrace), "")
	poll := findSpan(tracingtest.Trace(spans, pollTrace), "mcpbus-taskpoller", "task poll")
	if poll == nil || !slices.Contains(poll.Links, submitTrace) || poll.Attrs["mcpbus.task_id"] != taskID {
		t.Errorf("task poll span %+v is not linked to the submit trace %s", poll, submitTrace)
	}

	// No secret in any span, resource or event of anything exported.
	for _, p := range []string{"tokens", "discovery", "toolcall", "taskpoller", "api"} {
		procs[p].stop(t) // flushes what is still buffered
	}
	demo.stop(t)
	secrets := append([]string{o.ClientSecret, o.RefreshToken, key, headerSecret, restArg, natsArg, mcpArg, taskArg}, ep.Secrets()...)
	for _, c := range proxy.callsOf("echo") {
		secrets = append(secrets, strings.TrimPrefix(c.authorization, "Bearer "))
	}
	dump := rcv.Dump()
	if len(dump) == 0 {
		t.Fatal("nothing exported")
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(dump, s) {
			t.Errorf("an exported span carries the secret %.6s…", s)
		}
	}
	for _, word := range []string{"SEKRET", "Bearer", "client_secret", "refresh_token\":"} {
		if strings.Contains(dump, word) {
			t.Errorf("an exported span carries %q", word)
		}
	}
}

// hasServices reports whether spans include one from each service.
func hasServices(spans []tracingtest.Span, services ...string) bool {
	for _, svc := range services {
		if !slices.ContainsFunc(spans, func(s tracingtest.Span) bool { return s.Service == svc }) {
			return false
		}
	}
	return true
}

func hasSpan(spans []tracingtest.Span, service, name string) bool {
	return findSpan(spans, service, name) != nil
}

func findSpan(spans []tracingtest.Span, service, name string) *tracingtest.Span {
	for i := range spans {
		if spans[i].Service == service && spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

// connected reports what checkConnected checks.
func connected(spans []tracingtest.Span, parent string) bool {
	if parent != "" {
		spans = append(slices.Clone(spans), tracingtest.Span{SpanID: parent})
	}
	return tracingtest.Connected(spans)
}

// checkConnected fails unless spans form one tree: one root (or, with
// parent set, exactly the spans whose parent is the caller's span), every
// other span's parent among them.
func checkConnected(t *testing.T, what string, spans []tracingtest.Span, parent string) {
	t.Helper()
	if parent != "" {
		// The caller's span is not exported by mcpbus: stand it in.
		spans = append(slices.Clone(spans), tracingtest.Span{SpanID: parent})
	}
	if !tracingtest.Connected(spans) {
		t.Errorf("%s: the trace is not one connected tree:\n%s", what, tracingtest.Format(spans))
	}
}
