package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// subStack is tokens, discovery, two toolcall replicas and two api
// replicas (A and B) as separate processes in front of the demo server
// with -federation over streamable HTTP twice: "fed" and "secret" (which
// the guardrails deny).
type subStack struct {
	apiA, apiB   string
	dir, natsURL string
}

const subMalloryKey = "mcp-mallory-key-0003"

func startSubStack(t *testing.T) *subStack {
	t.Helper()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dir := t.TempDir()
	fedAddr, secretAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-fed", demoBin, "-transport", "http", "-addr", fedAddr, "-federation")
	startProcess(t, dir, "demo-secret", demoBin, "-transport", "http", "-addr", secretAddr, "-federation")
	apiA, apiB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"fed": {"type": "http", "url": "http://%s/mcp"}, "secret": {"type": "http", "url": "http://%s/mcp"}}}`, fedAddr, secretAddr)
	settings := natsSettings(natsURL, names) + fmt.Sprintf(`database:
  backend: memory
api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
    - {sha256: %s, user_id: mallory, role: user}
guardrails:
  enabled: true
  provider:
    use: allowlist
    config:
      denied_tools: ["server:secret"]
`, apiA, sha(mcpAliceKey), sha(mcpBobKey), sha(subMalloryKey))
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, svc := range []string{"tokens", "discovery", "toolcall", "api"} {
		startProcess(t, dir, svc, mcpbusBin, "serve", svc)
	}
	startProcess(t, dir, "toolcall-b", mcpbusBin, "serve", "toolcall")
	startProcessEnv(t, dir, "api-b", []string{"MCPBUS_API_LISTEN=" + apiB}, mcpbusBin, "serve", "api")
	waitHealthy(t, natsURL, names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceAPI)
	for _, addr := range []string{apiA, apiB} {
		testkit.Eventually(t, 60*time.Second, "api "+addr+" to list fed's greeting", func() bool {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/mcp/resources", nil)
			req.Header.Set("Authorization", "Bearer "+mcpAliceKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "mcpbus://fed/"+demo.GreetingURI)
		})
	}
	return &subStack{apiA: "http://" + apiA, apiB: "http://" + apiB, dir: dir, natsURL: natsURL}
}

// sdkSubscriber is testdata/sub_client.mjs running: the TypeScript SDK
// over /mcp, driven on stdin.
type sdkSubscriber struct {
	t      *testing.T
	stdin  io.WriteCloser
	events chan map[string]any
	mu     sync.Mutex
	seen   []map[string]any // every event, in order
}

func startSDKSubscriber(t *testing.T, sdk, url, key string, args ...string) *sdkSubscriber {
	t.Helper()
	cmd := exec.Command("node", append([]string{"testdata/sub_client.mjs", url}, args...)...)
	cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+sdk, "MCPBUS_KEY="+key)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testkit.SyncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	s := &sdkSubscriber{t: t, stdin: stdin, events: make(chan map[string]any, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			s.mu.Lock()
			s.seen = append(s.seen, ev)
			s.mu.Unlock()
			s.events <- ev
		}
		close(s.events)
	}()
	ready := s.next("ready")
	caps, _ := ready["capabilities"].(map[string]any)
	if res, _ := caps["resources"].(map[string]any); res["subscribe"] != true {
		t.Fatalf("initialize declares no resources.subscribe: %v (stderr: %s)", caps, cmd.Stderr)
	}
	return s
}

// next waits for the next event of one of kinds (an error event too).
func (s *sdkSubscriber) next(kinds ...string) map[string]any {
	s.t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("the SDK client exited waiting for %v", kinds)
			}
			if slices.Contains(kinds, ev["event"].(string)) {
				return ev
			}
		case <-timeout:
			s.t.Fatalf("no %v from the SDK client", kinds)
		}
	}
}

func (s *sdkSubscriber) send(cmd string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, cmd+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// updates are the URIs of every update the client has printed so far.
func (s *sdkSubscriber) updates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, ev := range s.seen {
		if ev["event"] == "updated" {
			out = append(out, ev["uri"].(string))
		}
	}
	return out
}

// TestResourceSubscriptionsAcrossReplicas: alice (the TypeScript SDK, a
// 2025-11-25 session on api replica A, and over /sse on replica B), bob (a 2026-07-28
// subscriptions/listen with resourceSubscriptions on replica B) and bob's
// `mcpbus stdio` subscribe to the same resource of one upstream
// connection: the upstream gets one resources/subscribe for it, and its
// notifications/resources/updated reaches all three with the visible URI;
// mallory, subscribed to another resource on the same connection, never
// gets it. An unmapped URI and a denied server's are -32602 without the
// URI in the message. When alice unsubscribes the upstream keeps its
// subscription; when the last subscriber leaves it gets resources/unsubscribe.
func TestResourceSubscriptionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	sdk := testkit.SDK(t)
	st := startSubStack(t)
	uri := "mcpbus://fed/" + demo.GreetingURI

	alice := startSDKSubscriber(t, sdk, st.apiA+"/mcp", mcpAliceKey)
	alice.send("subscribe " + uri)
	if ev := alice.next("subscribed", "error"); ev["event"] != "subscribed" {
		t.Fatalf("alice's resources/subscribe: %v", ev)
	}

	// The attacks: a forged server with a token in the query, a server
	// the guardrails deny.
	for _, bad := range []string{"mcpbus://nosuch/" + demo.GreetingURI + "?token=s3cr3t", "mcpbus://secret/" + demo.GreetingURI} {
		alice.send("subscribe " + bad)
		ev := alice.next("subscribed", "error")
		msg, _ := ev["message"].(string)
		if ev["event"] != "error" || ev["code"] != float64(-32602) {
			t.Errorf("subscribe %s: %v, want error -32602", bad, ev)
		}
		if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, demo.GreetingURI) {
			t.Errorf("subscribe %s: the error quotes the URI: %q", bad, msg)
		}
	}

	// alice again, over /sse on replica B.
	aliceSSE := startSDKSubscriber(t, sdk, st.apiB+"/sse", mcpAliceKey, "sse")
	aliceSSE.send("subscribe " + uri)
	if ev := aliceSSE.next("subscribed", "error"); ev["event"] != "subscribed" {
		t.Fatalf("alice's resources/subscribe over /sse: %v", ev)
	}

	// mallory on B subscribes to another resource of the same connection.
	mallory := startSDKSubscriber(t, sdk, st.apiB+"/mcp", subMalloryKey)
	mallory.send("subscribe mcpbus://fed/" + demo.BlobURI)
	if ev := mallory.next("subscribed", "error"); ev["event"] != "subscribed" {
		t.Fatalf("mallory's resources/subscribe: %v", ev)
	}

	// bob on B: a 2026-07-28 listen naming the URI (and one that is not his).
	bob := mcpClient(t, st.apiB, mcpBobKey)
	bobSeen := watchNotifications(bob)
	modernInitialized(t, bob)
	stopListen, err := bob.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{uri, "mcpbus://nosuch/x"}},
		func(err error) { t.Logf("listen ended: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopListen)
	bobSeen.await(t, "notifications/subscriptions/acknowledged")
	if ack := bobSeen.params(t, "notifications/subscriptions/acknowledged"); !strings.Contains(ack, uri) || strings.Contains(ack, "nosuch") {
		t.Errorf("the listen acknowledged %s, want %s only", ack, uri)
	}

	// bob's `mcpbus stdio`, 2025-11-25.
	stdio := mcpbusStdio(t, st.dir, st.natsURL, "bob", "subs")
	stdioSeen := watchNotifications(stdio)
	initialized(t, stdio, mcp.ProtocolVersion20251125)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := stdio.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
		t.Fatalf("stdio resources/subscribe: %v", err)
	}

	// The SDK opens its GET stream after initialize, in the background:
	// the greeting is touched until alice has an update.
	testkit.Eventually(t, 120*time.Second, "alice to receive the update", func() bool {
		if text, isErr := callText(t, bob, "fed_"+demo.ToolTouchGreeting, nil); isErr {
			t.Fatalf("touch_greeting: %s", text)
		}
		select {
		case ev := <-alice.events:
			return ev["event"] == "updated"
		case <-time.After(3 * time.Second):
			return false
		}
	})
	bobSeen.await(t, string(mcp.MethodNotificationResourceUpdated))
	stdioSeen.await(t, string(mcp.MethodNotificationResourceUpdated))
	if ev := aliceSSE.next("updated"); ev["uri"] != uri {
		t.Errorf("alice over /sse got %v, want the visible URI %s", ev, uri)
	}
	for who, got := range map[string]string{"bob's listen": bobSeen.params(t, string(mcp.MethodNotificationResourceUpdated)),
		"bob's stdio": stdioSeen.params(t, string(mcp.MethodNotificationResourceUpdated))} {
		if !strings.Contains(got, `"uri":"`+uri+`"`) {
			t.Errorf("%s got %s, want the visible URI %s", who, got, uri)
		}
	}
	if got := alice.updates(); len(got) == 0 || got[0] != uri {
		t.Errorf("alice's updates: %v, want %s", got, uri)
	}
	// mallory's stream is served by replica B like bob's listen, which had
	// the update: it named bob's subscriber, never mallory's.
	if got := mallory.updates(); len(got) != 0 {
		t.Errorf("mallory received updates of a resource she did not subscribe: %v", got)
	}
	counts := func() string { text, _ := callText(t, bob, "fed_"+demo.ToolSubscriptionCounts, nil); return text }
	// greeting once for alice's two sessions, bob's listen and bob's
	// stdio; blob once for mallory.
	if got := counts(); got != demo.SubscriptionCounts(2, 0) {
		t.Errorf("upstream subscription counts = %q, want %q (one per connection and URI)", got, demo.SubscriptionCounts(2, 0))
	}

	alice.send("unsubscribe " + uri)
	if ev := alice.next("unsubscribed", "error"); ev["event"] != "unsubscribed" {
		t.Fatalf("alice's resources/unsubscribe: %v", ev)
	}
	aliceSSE.send("unsubscribe " + uri)
	if ev := aliceSSE.next("unsubscribed", "error"); ev["event"] != "unsubscribed" {
		t.Fatalf("alice's resources/unsubscribe over /sse: %v", ev)
	}
	if err := stdio.Unsubscribe(ctx, mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: uri}}); err != nil {
		t.Fatalf("stdio resources/unsubscribe: %v", err)
	}
	if got := counts(); got != demo.SubscriptionCounts(2, 0) {
		t.Errorf("after alice and the stdio left, counts = %q: bob's listen still needs the upstream subscription", got)
	}
	stopListen()
	testkit.Eventually(t, 60*time.Second, "the upstream resources/unsubscribe once the last subscriber left", func() bool {
		return counts() == demo.SubscriptionCounts(2, 1)
	})
}

// params is the JSON params of the last notification with method received.
func (n *notifications) params(t *testing.T, method string) string {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.got) - 1; i >= 0; i-- {
		if n.got[i].Method == method {
			b, _ := json.Marshal(n.got[i].Params)
			return string(b)
		}
	}
	t.Fatalf("no %s received", method)
	return ""
}

// TestEverythingSubscriptionOverStdio: server-everything over stdio keeps
// its subscriptions and its simulated updates per process. A 2025-11-25
// session's resources/subscribe through mcpbus is made on the thread's own
// stdio session, so the session's toggle-subscriber-updates (a tool call
// in the same thread) makes that process send
// notifications/resources/updated, which reach the client's GET stream
// with the visible URI.
func TestEverythingSubscriptionOverStdio(t *testing.T) {
	t.Parallel()
	st := startFedStack(t)
	everythingUpdateReaches(t, st.base, fedKey)
}

// everythingUpdateReaches: a 2025-11-25 client of base (its GET stream
// open) subscribes server-everything's ("everything") architecture
// document as key, calls toggle-subscriber-updates in its thread and
// receives notifications/resources/updated with the visible URI.
func everythingUpdateReaches(t *testing.T, base, key string) {
	t.Helper()
	c, seen := streamingClient(t, base, key)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	uri := "mcpbus://everything/demo://resource/static/document/architecture.md"
	if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	if text, isErr := callText(t, c, "everything_toggle-subscriber-updates", nil); isErr || !strings.Contains(text, "Started") {
		t.Fatalf("toggle-subscriber-updates: %s", text)
	}
	t.Cleanup(func() { _, _ = callText(t, c, "everything_toggle-subscriber-updates", nil) })
	seen.await(t, string(mcp.MethodNotificationResourceUpdated))
	if got := seen.params(t, string(mcp.MethodNotificationResourceUpdated)); !strings.Contains(got, `"uri":"`+uri+`"`) {
		t.Errorf("updated %s, want the visible URI %s", got, uri)
	}
}

// streamingClient is a 2025-11-25 mcp-go client of base as key, its GET
// stream open, and the notifications it receives.
func streamingClient(t *testing.T, base, key string) (*client.Client, *notifications) {
	t.Helper()
	c := mcpClient(t, base, key, transport.WithContinuousListening())
	seen := watchNotifications(c)
	initialized(t, c, mcp.ProtocolVersion20251125)
	return c, seen
}
