package toolcall_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A modern-only stdio server (2026-07-28 alone, initialize refused) works
// through toolcall: calls succeed, each thread still gets its own
// process, every request carries the modern _meta and no initialize is
// ever sent.
func TestModernOnlyStdioServer(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	entry = strings.Replace(entry, `"FAKE_RECORD"`, `"FAKE_ERA": "modern", "FAKE_RECORD"`, 1)
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))

	if got := text(t, e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"modern"}`)})); got != "modern" {
		t.Fatalf("echo = %q", got)
	}
	a := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "alice", ThreadID: "t1"}))
	a2 := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "alice", ThreadID: "t1"}))
	b := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "bob", ThreadID: "t1"}))
	if a.Pid == 0 || a.Pid != a2.Pid || a.Pid == b.Pid {
		t.Errorf("per-thread processes: alice %d/%d, bob %d", a.Pid, a2.Pid, b.Pid)
	}
	rs := readRecords(t, rec)
	if n := countMethod(rs, "initialize"); n != 0 {
		t.Errorf("initialize requests = %d, want 0", n)
	}
	if n := countMethod(rs, "server/discover"); n != 3 {
		t.Errorf("server/discover requests = %d, want 3 (one per process)", n)
	}
	for _, r := range rs {
		if r.Method == "tools/call" && !strings.Contains(string(r.Meta), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) {
			t.Errorf("tools/call without the modern _meta: %s", r.Meta)
		}
	}
}

// The demo server in its modern-only mode over streamable HTTP works
// through toolcall (no session id; Mcp-Method/Mcp-Name checked by the
// server).
func TestModernOnlyDemoServerOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	h, err := demo.NewHTTP(demo.EraModern, demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(hs.URL+"/mcp", `"headers": {"X-Static": "s1"}`)}, ""),
		tools("web", "add", "fail", "whoami"))
	r := e.mustCall(t, bus.Call{Tool: "web_add", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
	if got := text(t, r); got != "5" || !strings.Contains(string(r.StructuredContent), `"sum":5`) {
		t.Errorf("add = %q, %s", got, r.StructuredContent)
	}
	r, err = e.call(t, bus.Call{Tool: "web_whoami", UserID: "alice"})
	if err != nil || !strings.Contains(string(r.StructuredContent), `"X-Static":"s1"`) {
		t.Errorf("whoami = %s, %v (want the static header)", r.StructuredContent, err)
	}
}

// The catalog's inputSchema reaches the upstream call: a 2026-07-28
// server over streamable HTTP gets the arguments its tool annotates with
// x-mcp-header as Mcp-Param-* headers (Base64-wrapped when not plain
// ASCII), as the spec's custom headers from tool parameters say.
func TestModernParamHeadersFromTheCatalog(t *testing.T) {
	t.Parallel()
	inner, err := demo.NewHTTP(demo.EraModern, demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			seen = append(seen, r.Header.Get("Mcp-Param-Message"))
			mu.Unlock()
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	catalog := tools("web", "echo")
	catalog[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","x-mcp-header":"Message"}}}`)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(hs.URL+"/mcp", "")}, ""), catalog)
	for _, msg := range []string{"plain", "über"} {
		args, _ := json.Marshal(map[string]string{"message": msg})
		if got := text(t, e.mustCall(t, bus.Call{Tool: "web_echo", Arguments: args})); got != msg {
			t.Errorf("echo = %q, want %q", got, msg)
		}
	}
	want := []string{"plain", "=?base64?" + base64.StdEncoding.EncodeToString([]byte("über")) + "?="}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("Mcp-Param-Message headers = %q, want %q", seen, want)
	}
}
