package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// notifyStack is tokens, discovery, toolcall and two api replicas (A and
// B) as separate processes on the shared NATS server, in front of the
// conformance fixture (server "fx", streamable HTTP, both eras: its
// test_trigger_tool_change adds or removes test_dynamic_tool and sends
// notifications/tools/list_changed) and the demo server with -logging
// twice: server "logs" (streamable HTTP, both eras: mcpbus speaks
// 2026-07-28 to it, a log level per request) and "legacylogs" (legacy era
// only, so that every caller's calls share one upstream session).
type notifyStack struct {
	apiA, apiB string // base URLs
	// dir holds config.yaml (the namespace `mcpbus stdio` reads there).
	dir, natsURL string
}

func startNotifyStack(t *testing.T) *notifyStack {
	t.Helper()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dir := t.TempDir()
	fxAddr, logsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "fixture", demoBin, "-transport", "http", "-addr", fxAddr, "-conformance")
	legacyAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-logs", demoBin, "-transport", "http", "-addr", logsAddr, "-logging")
	startProcess(t, dir, "demo-legacy-logs", demoBin, "-transport", "http", "-addr", legacyAddr, "-logging", "-era", "legacy")
	apiA, apiB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"fx": {"type": "http", "url": "http://%s/mcp"}, "logs": {"type": "http", "url": "http://%s/mcp"},
		"legacylogs": {"type": "http", "url": "http://%s/mcp"}}}`, fxAddr, logsAddr, legacyAddr)
	settings := natsSettings(natsURL, names) + fmt.Sprintf(`database:
  backend: memory
api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
`, apiA, sha(mcpAliceKey), sha(mcpBobKey))
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, svc := range []string{"tokens", "discovery", "toolcall"} {
		startProcess(t, dir, svc, mcpbusBin, "serve", svc)
	}
	// Both api replicas hold the credentials key: a requestState they
	// relay is sealed to its caller (and opens on either replica).
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	startProcessEnv(t, dir, "api", []string{"MCPBUS_CREDENTIALS_KEY=" + key}, mcpbusBin, "serve", "api")
	startProcessEnv(t, dir, "api-b", []string{"MCPBUS_API_LISTEN=" + apiB, "MCPBUS_CREDENTIALS_KEY=" + key}, mcpbusBin, "serve", "api")
	waitHealthy(t, natsURL, names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceAPI)
	for _, addr := range []string{apiA, apiB} {
		testkit.Eventually(t, 60*time.Second, "api "+addr+" to listen", func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return true
		})
	}
	return &notifyStack{apiA: "http://" + apiA, apiB: "http://" + apiB, dir: dir, natsURL: natsURL}
}

// mcpClient is an mcp-go streamable HTTP client of base as the key's user
// (not initialized).
func mcpClient(t *testing.T, base, key string, opts ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// restGeneration is the generation of user's catalog over REST.
func restGeneration(t *testing.T, base, key string) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/mcp/tools", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Generation int64 `json:"generation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/mcp/tools: %d %v", resp.StatusCode, err)
	}
	return body.Generation
}

// notifications collects the methods (and params) of the notifications a
// client receives.
type notifications struct {
	mu  sync.Mutex
	got []mcp.JSONRPCNotification
	ch  chan string // methods, as they come (dropped when full)
}

func watchNotifications(c *client.Client) *notifications {
	n := &notifications{ch: make(chan string, 256)}
	c.OnNotification(func(m mcp.JSONRPCNotification) {
		n.mu.Lock()
		n.got = append(n.got, m)
		n.mu.Unlock()
		select {
		case n.ch <- m.Method:
		default:
		}
	})
	return n
}

// await waits for the next notification with method.
func (n *notifications) await(t *testing.T, method string) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case m := <-n.ch:
			if m == method {
				return
			}
		case <-deadline:
			t.Fatalf("no %s within 90s", method)
		}
	}
}

// messages is the data of the notifications/message received so far.
func (n *notifications) messages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.got {
		if m.Method == string(mcp.MethodNotificationMessage) {
			out = append(out, fmt.Sprint(m.Params.AdditionalFields["data"]))
		}
	}
	return out
}

// TestMCPUpstreamListChangedAcrossReplicas: an upstream that adds a tool
// at run time and sends notifications/tools/list_changed (the conformance
// fixture's test_trigger_tool_change, called by alice through replica A)
// makes discovery rediscover that server alone; bob, whose client is on
// replica B, receives notifications/tools/list_changed on his
// subscriptions/listen (2026-07-28), over `mcpbus stdio` and on his legacy
// session's GET stream (2025-11-25), and his next tools/list has the
// change; nobody reset the cache (the catalog generation is unchanged).
func TestMCPUpstreamListChangedAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := startNotifyStack(t)

	alice := mcpClient(t, st.apiA, mcpAliceKey)
	modernInitialized(t, alice)
	testkit.Eventually(t, 90*time.Second, "the fixture in alice's catalog", func() bool {
		return slices.Contains(listedNames(t, alice), "fx_test_trigger_tool_change")
	})
	if slices.Contains(listedNames(t, alice), "fx_test_dynamic_tool") {
		t.Fatal("test_dynamic_tool listed before any trigger")
	}
	gen := restGeneration(t, st.apiB, mcpBobKey)

	// bob on replica B, 2026-07-28: a listen, acknowledged before the
	// change, so the notification cannot be missed.
	bob := mcpClient(t, st.apiB, mcpBobKey)
	bobSeen := watchNotifications(bob)
	modernInitialized(t, bob)
	stop, err := bob.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { t.Errorf("listen: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	bobSeen.await(t, "notifications/subscriptions/acknowledged")

	if text, isErr := callText(t, alice, "fx_test_trigger_tool_change", nil); isErr || !strings.Contains(text, "added") {
		t.Fatalf("trigger: %q %v", text, isErr)
	}
	bobSeen.await(t, string(mcp.MethodNotificationToolsListChanged))
	if names := listedNames(t, bob); !slices.Contains(names, "fx_test_dynamic_tool") {
		t.Fatalf("bob's tools/list after list_changed lacks fx_test_dynamic_tool: %v", names)
	}
	if text, isErr := callText(t, bob, "fx_test_dynamic_tool", nil); isErr || text != "dynamic" {
		t.Errorf("the new tool through mcpbus: %q %v", text, isErr)
	}
	if after := restGeneration(t, st.apiB, mcpBobKey); after != gen {
		t.Errorf("catalog generation went from %d to %d: a list_changed is not a reset", gen, after)
	}

	// `mcpbus stdio` as bob: initialized, it gets the next change's
	// list_changed on stdout (the tool removed again).
	stdio := mcpbusStdio(t, st.dir, st.natsURL, "bob", "notify")
	stdioSeen := watchNotifications(stdio)
	initialized(t, stdio, mcp.ProtocolVersion20251125)
	if text, isErr := callText(t, alice, "fx_test_trigger_tool_change", nil); isErr || !strings.Contains(text, "removed") {
		t.Fatalf("trigger: %q %v", text, isErr)
	}
	stdioSeen.await(t, string(mcp.MethodNotificationToolsListChanged))
	if names := listedNames(t, stdio); slices.Contains(names, "fx_test_dynamic_tool") {
		t.Errorf("stdio tools/list after the removal's list_changed still has fx_test_dynamic_tool")
	}

	// bob's legacy session on B: its GET stream gets the list_changed of
	// the next change (the tool removed). The stream opens in the
	// background, so alice toggles until one arrives, then the list is
	// checked against the last toggle.
	legacy := mcpClient(t, st.apiB, mcpBobKey, transport.WithContinuousListening())
	legacySeen := watchNotifications(legacy)
	initialized(t, legacy, mcp.ProtocolVersion20251125)
	present := true
	testkit.Eventually(t, 120*time.Second, "list_changed on bob's legacy GET stream", func() bool {
		text, _ := callText(t, alice, "fx_test_trigger_tool_change", nil)
		present = strings.Contains(text, "added")
		select {
		case <-legacySeen.ch:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	})
	testkit.Eventually(t, 60*time.Second, "bob's legacy tools/list to follow the last change", func() bool {
		return slices.Contains(listedNames(t, legacy), "fx_test_dynamic_tool") == present
	})
	if after := restGeneration(t, st.apiB, mcpBobKey); after != gen {
		t.Errorf("catalog generation went from %d to %d", gen, after)
	}
}

// TestMCPUpstreamLogMessagesReachTheirCallerOnly: an upstream's
// notifications/message sent during a call reach that call's client at
// the level it asked for and above (a legacy session's logging/setLevel on
// replica A over /mcp, /sse and `mcpbus stdio`, a 2026-07-28 request's
// _meta log level on replica B), never
// below it, never a client that asked for none, and never another user's:
// alice's and bob's calls run at the same time on the same upstream
// session (the server's static credentials), and neither sees the
// other's messages.
func TestMCPUpstreamLogMessagesReachTheirCallerOnly(t *testing.T) {
	t.Parallel()
	st := startNotifyStack(t)

	alice := mcpClient(t, st.apiA, mcpAliceKey)
	aliceSeen := watchNotifications(alice)
	initialized(t, alice, mcp.ProtocolVersion20251125)
	testkit.Eventually(t, 90*time.Second, "the logging server in alice's catalog", func() bool {
		return slices.Contains(listedNames(t, alice), "logs_log_levels")
	})

	// No level set: nothing is forwarded.
	if text, isErr := callText(t, alice, "logs_log_levels", map[string]any{"tag": "unasked"}); isErr || !strings.Contains(text, "logged") {
		t.Fatalf("log_levels: %q %v", text, isErr)
	}
	if got := aliceSeen.messages(); len(got) != 0 {
		t.Errorf("messages without logging/setLevel: %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := alice.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	if _, isErr := callText(t, alice, "logs_log_levels", map[string]any{"tag": "alice-1"}); isErr {
		t.Fatal("log_levels failed")
	}
	want := []string{"alice-1 warning 0", "alice-1 error 0", "alice-1 critical 0", "alice-1 alert 0", "alice-1 emergency 0"}
	if got := aliceSeen.messages(); !slices.Equal(got, want) {
		t.Fatalf("alice's messages at warning = %q, want %q (before the result, in order)", got, want)
	}

	// The 2024-11-05 transport (/sse) and `mcpbus stdio`: the messages
	// come on the session's stream, at the session's level.
	sse, err := client.NewSSEMCPClient(st.apiA+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + mcpAliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sse.Close() })
	if err := sse.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sseSeen := watchNotifications(sse)
	initialized(t, sse, mcp.ProtocolVersion20241105)
	stdio := mcpbusStdio(t, st.dir, st.natsURL, "alice", "logs")
	stdioSeen := watchNotifications(stdio)
	initialized(t, stdio, mcp.ProtocolVersion20251125)
	for _, c := range []struct {
		name  string
		c     *client.Client
		seen  *notifications
		level mcp.LoggingLevel
		want  []string
	}{
		{"sse", sse, sseSeen, mcp.LoggingLevelError, []string{"sse error 0", "sse critical 0", "sse alert 0", "sse emergency 0"}},
		{"stdio", stdio, stdioSeen, mcp.LoggingLevelCritical, []string{"stdio critical 0", "stdio alert 0", "stdio emergency 0"}},
	} {
		if err := c.c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: c.level}}); err != nil {
			t.Fatalf("%s: logging/setLevel: %v", c.name, err)
		}
		if _, isErr := callText(t, c.c, "logs_log_levels", map[string]any{"tag": c.name}); isErr {
			t.Fatalf("%s: log_levels failed", c.name)
		}
		if got := c.seen.messages(); !slices.Equal(got, c.want) {
			t.Errorf("%s: messages = %q, want %q", c.name, got, c.want)
		}
	}

	// 2026-07-28 on replica B: bob's request asks for debug in _meta.
	bob := mcpClient(t, st.apiB, mcpBobKey)
	bobSeen := watchNotifications(bob)
	modernInitialized(t, bob)
	bobCall := func(server, tag string, rounds, gapMS int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var req mcp.CallToolRequest
		req.Params.Name, req.Params.Arguments = server+"_log_levels", map[string]any{"tag": tag, "rounds": rounds, "gap_ms": gapMS}
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"io.modelcontextprotocol/logLevel": "debug"}}
		if res, err := bob.CallTool(ctx, req); err != nil || res.IsError {
			t.Errorf("bob's log_levels: %v %+v", err, res)
		}
	}
	bobCall("logs", "bob-1", 1, 0)
	if got := bobSeen.messages(); len(got) != 8 || got[0] != "bob-1 debug 0" || got[7] != "bob-1 emergency 0" {
		t.Fatalf("bob's messages at debug = %q, want the 8 levels of bob-1", got)
	}

	// The attack: both call at once, many rounds apart, on the one
	// upstream session of legacylogs (whose server, mcp-go, writes a
	// session's messages onto whichever of its streams is open); each may
	// see its own messages, never the other's.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		bobCall("legacylogs", "bob-2", 20, 10)
	}()
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var req mcp.CallToolRequest
		req.Params.Name, req.Params.Arguments = "legacylogs_log_levels", map[string]any{"tag": "alice-2", "rounds": 20, "gap_ms": 10}
		if res, err := alice.CallTool(ctx, req); err != nil || res.IsError {
			t.Errorf("alice's log_levels: %v %+v", err, res)
		}
	}()
	wg.Wait()
	for _, m := range bobSeen.messages() {
		if !strings.HasPrefix(m, "bob-") {
			t.Errorf("bob received someone else's log message: %q", m)
		}
	}
	for _, m := range aliceSeen.messages() {
		if !strings.HasPrefix(m, "alice-") {
			t.Errorf("alice received someone else's log message: %q", m)
		}
		if strings.Contains(m, " debug ") || strings.Contains(m, " info ") || strings.Contains(m, " notice ") {
			t.Errorf("alice received a message below warning: %q", m)
		}
	}
}
