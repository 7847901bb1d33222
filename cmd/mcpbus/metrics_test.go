package main_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// scrape returns the body of GET url ("" when it does not answer 200).
func scrape(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// In dev mode the api's /metrics holds every service's metrics (one
// registry), and a tool call leaves its audit record, read back by
// `mcpbus audit tail` and GET /api/mcp/audit.
func TestDevModeMetricsAndAudit(t *testing.T) {
	t.Parallel()
	dir, apiAddr, _ := startDev(t, "")
	status, body := httpJSON(t, "POST", "http://"+apiAddr+"/api/mcp/tools/demo_echo/call", `{"arguments":{"message":"audit-me-arg"}, "thread_id": "th-9"}`)
	if status != 200 {
		t.Fatalf("call: %d %v", status, body)
	}
	wants := []string{
		`mcpbus_toolcall_calls_total{outcome="ok",server="demo",tool="demo_echo",transport="stdio"} 1`,
		`mcpbus_toolcall_call_duration_seconds_count{server="demo",tool="demo_echo"} 1`,
		`mcpbus_toolcall_stdio_sessions 1`,
		`mcpbus_discovery_duration_seconds_count{outcome="ok",server="demo"}`,
		`mcpbus_discovery_tools{server="demo"}`,
		`mcpbus_cache_generation{service="toolcall"}`,
		`mcpbus_api_requests_total{method="POST",route="/api/mcp/tools/:name/call",status="200"} 1`,
		// The audit record is acknowledged in the background, after the reply.
		`mcpbus_audit_records_total{kind="call"} 1`,
		`go_goroutines`,
	}
	var out string
	missing := func() []string {
		var m []string
		for _, want := range wants {
			if !strings.Contains(out, want) {
				m = append(m, want)
			}
		}
		return m
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("/metrics lacks %q", missing())
		}
	})
	testkit.Eventually(t, 30*time.Second, "the call's metrics (and its acknowledged audit record) on the api's /metrics", func() bool {
		out = scrape("http://" + apiAddr + "/metrics")
		return len(missing()) == 0
	})
	for _, svc := range []string{"tokens", "discovery", "toolcall", "taskpoller", "api"} {
		if !strings.Contains(out, `mcpbus_nats_reconnects_total{service="`+svc+`"} 0`) {
			t.Errorf("/metrics lacks the NATS reconnects of %s", svc)
		}
	}

	cmd := exec.Command(mcpbusBin, "audit", "tail", "--tool", "demo_echo")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=")
	tail, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(tail), "call user=default thread=th-9 tool=demo_echo server=demo transport=stdio outcome=ok") {
		t.Errorf("audit tail: %v\n%s", err, tail)
	}
	if strings.Contains(string(tail), "audit-me-arg") {
		t.Errorf("audit tail shows the call's arguments: %s", tail)
	}
	status, body = httpJSON(t, "GET", "http://"+apiAddr+"/api/mcp/audit?user=default", "")
	if recs, _ := body["records"].([]any); status != 200 || len(recs) != 1 {
		t.Errorf("GET /api/mcp/audit: %d %v", status, body)
	}
}

// `mcpbus serve <service> --metrics-listen` serves that process's metrics
// on its own listener.
func TestServeMetricsListen(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/config.yaml", []byte("nats:\n  namespace: "+b.Names.Namespace()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcessEnv(t, dir, "tokens", []string{"MCPBUS_CONFIG=" + dir + "/config.yaml"}, mcpbusBin, "serve", "tokens", "--nats-url", b.URL, "--metrics-listen", addr)
	var out string
	testkit.Eventually(t, 30*time.Second, "the tokens process's /metrics", func() bool {
		out = scrape("http://" + addr + "/metrics")
		return strings.Contains(out, `mcpbus_nats_reconnects_total{service="tokens"} 0`)
	})
	if !strings.Contains(out, "go_goroutines") || strings.Contains(out, `service="api"`) {
		t.Errorf("tokens /metrics:\n%s", out)
	}
}

// `mcpbus dev --metrics-listen A --pprof` serves the profiler on A, and
// never on the api's own listener.
func TestDevPprofOnlyOnMetricsListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin)
	startDevArgs(t, dir, ext, "api:\n  listen: "+apiAddr+"\n", []string{"--metrics-listen", metricsAddr, "--pprof"})
	if out := scrape("http://" + metricsAddr + "/debug/pprof/"); !strings.Contains(out, "goroutine") {
		t.Errorf("GET /debug/pprof/ on the metrics listener: %q, want the profile index", out)
	}
	if out := scrape("http://" + metricsAddr + "/debug/pprof/goroutine?debug=1"); !strings.Contains(out, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine on the metrics listener: %q", out)
	}
	resp, err := http.Get("http://" + apiAddr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on the api listener: %d, want 404", resp.StatusCode)
	}
}
