package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// silentSSE is an SSE endpoint that opens the stream and never sends the
// endpoint event.
func silentSSE(t *testing.T) string {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) })
	return hs.URL + "/sse"
}

func TestHungServersTimeOutAloneAtTheirOwnDeadline(t *testing.T) {
	t.Parallel()
	hung, healthy := newFake(t, tools("h", 1)...), newFake(t, tools("ok", 2)...)
	hung.mode.Store(modeHang)
	b := startWith(t, cfgOf(
		srvJSON{"hunghttp", httpServer(hung.URL, `"session_init_timeout": 0.2`)},
		srvJSON{"hungsse", fmt.Sprintf(`{"type": "sse", "url": %q, "session_init_timeout": 0.2}`, silentSSE(t))},
		srvJSON{"hungstdio", `{"type": "stdio", "command": "sleep", "args": ["300"], "session_init_timeout": 0.2}`},
		srvJSON{"web", httpServer(healthy.URL, "")},
	), noWarm)

	// The healthy server's default deadline is 60 s and the hung ones never
	// answer: the lookup returns well within this request's 10 s only
	// because each hung server is cut at its own 0.2 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.ToolsList(), bus.ToolsListRequest{})
	if err != nil {
		t.Fatalf("tools.list: %v", err)
	}
	if got := strings.Join(names(r), ","); got != "web_ok0,web_ok1" {
		t.Errorf("catalog = %s, want the healthy server's tools", got)
	}
	if got := strings.Join(failedNames(r), ","); got != "hunghttp,hungsse,hungstdio" {
		t.Fatalf("failed servers = %+v", r.FailedServers)
	}
	for _, f := range r.FailedServers {
		if !strings.Contains(f.Error, "'"+f.Server+"'") || !strings.Contains(f.Error, "session_init_timeout") {
			t.Errorf("failure of %s = %q; want the server named and session_init_timeout", f.Server, f.Error)
		}
	}
}

func TestOAuthServerGetsItsTokenFromTheBusOnce(t *testing.T) {
	t.Parallel()
	secured := newFakeAuth(t, "Authorization", "Bearer tok-from-bus", tools("s", 1)...)
	plainFake := newFake(t, tools("p", 1)...)
	b := testkit.StartBus(t)

	tokenRequests := serveTokens(t, b, "Bearer tok-from-bus")

	sec := srvJSON{"secure", httpServer(secured.URL, `"headers": {"authorization": "Bearer static"}, "oauth": {"enabled": true, "token_url": "http://127.0.0.1:1/token", "client_id": "id", "client_secret": "secret"}`)}
	b.PublishExtensions(t, cfgOf(sec, srvJSON{"plain", httpServer(plainFake.URL, "")}))
	runService(t, b, noWarm)

	r := mustList(t, b)
	if !hasTool(r, "secure_s0") || len(r.FailedServers) != 0 {
		t.Fatalf("tools %v, failed %+v; want the OAuth server listed", names(r), r.FailedServers)
	}
	reqs := tokenRequests()
	if len(reqs) != 1 || reqs[0].Server != "secure" || reqs[0].ConfigFingerprint == "" {
		t.Fatalf("token requests = %+v; want one for secure with its config fingerprint", reqs)
	}
	// The OAuth header replaced the static one of the same name (any case).
	for _, h := range secured.headers {
		if v := h.Values("Authorization"); len(v) != 1 || v[0] != "Bearer tok-from-bus" {
			t.Fatalf("upstream saw Authorization %q", v)
		}
	}

	// Editing another server re-discovers it without a new token fetch.
	b.PublishExtensions(t, cfgOf(sec, srvJSON{"plain", httpServer(plainFake.URL, `"description": "edited"`)}))
	testkit.Eventually(t, 20*time.Second, "plain re-discovered", func() bool { _, _ = list(t, b); return plainFake.inits() == 2 })
	if n := len(tokenRequests()); n != 1 || secured.inits() != 1 {
		t.Errorf("unchanged OAuth server: %d token requests, %d initializations; want 1 and 1", n, secured.inits())
	}
}

func TestRefusedStaticHeaderIsSkippedWithoutEchoingIt(t *testing.T) {
	t.Parallel()
	const secret = "wrong-secret-value-42"
	upstream := newFakeAuth(t, "X-API-Key", "right-key", tools("v", 1)...)
	other := newFake(t, tools("o", 1)...)
	b := startWith(t, cfgOf(
		// An unset $VAR expands to "": the server is attempted and refused.
		srvJSON{"openviking", httpServer(upstream.URL, `"headers": {"X-API-Key": "$MCPBUS_TEST_SURELY_UNSET_KEY"}`)},
		srvJSON{"wrongkey", httpServer(upstream.URL, fmt.Sprintf(`"headers": {"X-API-Key": %q}`, secret))},
		srvJSON{"other", httpServer(other.URL, "")},
	), discovery.Config{})
	r := mustList(t, b)
	if !hasTool(r, "other_o0") || strings.Join(failedNames(r), ",") != "openviking,wrongkey" {
		t.Fatalf("tools %v, failed %+v", names(r), r.FailedServers)
	}
	// Each is refused at its first request, the era probe (a 401 says
	// nothing of the era, so no initialize follows it).
	if n := upstream.count("server/discover"); n != 2 || upstream.inits() != 0 {
		t.Errorf("upstream saw %d server/discover and %d initialize attempts, want 2 and 0 (both servers attempted, the 401 not read as a legacy server)", n, upstream.inits())
	}
	for _, f := range r.FailedServers {
		if !strings.Contains(f.Error, "'"+f.Server+"'") || strings.Contains(f.Error, secret) {
			t.Errorf("failure of %s = %q; want the server named and no header value", f.Server, f.Error)
		}
	}
	st := servers(t, b, bus.ServersRequest{NoRefresh: true})
	for _, s := range st.Servers {
		if strings.Contains(s.LastError, secret) {
			t.Errorf("status of %s echoes the header value: %q", s.Name, s.LastError)
		}
	}
}

func TestStdioDiscoveryWorkingDirectory(t *testing.T) {
	t.Parallel()
	demoBin := testkit.DemoServer(t)
	dir, wd := t.TempDir(), t.TempDir()
	serviceWD, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// sh records its working directory, then becomes the demo server.
	recorder := func(out string) string {
		return fmt.Sprintf(`"command": "sh", "args": ["-c", "pwd > %s; exec %s"]`, out, demoBin)
	}
	b := start(t, cfgOf(
		srvJSON{"withcwd", fmt.Sprintf(`{"type": "stdio", %s, "cwd": %q}`, recorder(filepath.Join(dir, "withcwd")), wd)},
		srvJSON{"inherit", fmt.Sprintf(`{"type": "stdio", %s}`, recorder(filepath.Join(dir, "inherit")))},
		srvJSON{"nocwd", fmt.Sprintf(`{"type": "stdio", "command": %q, "cwd": %q}`, demoBin, filepath.Join(wd, "does-not-exist"))},
	))
	r := mustList(t, b)
	if !hasTool(r, "withcwd_echo") || !hasTool(r, "inherit_echo") {
		t.Fatalf("tools %v, failed %+v", names(r), r.FailedServers)
	}
	for file, want := range map[string]string{"withcwd": wd, "inherit": serviceWD} {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || strings.TrimSpace(string(raw)) != want {
			t.Errorf("%s discovered in %q (%v), want %q", file, strings.TrimSpace(string(raw)), err, want)
		}
	}
	if len(r.FailedServers) != 1 || r.FailedServers[0].Server != "nocwd" ||
		!strings.Contains(r.FailedServers[0].Error, "'nocwd'") || !strings.Contains(r.FailedServers[0].Error, "cwd") {
		t.Errorf("failed servers = %+v; want nocwd with a cwd error naming it", r.FailedServers)
	}
}
