package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// modernInitialized initializes c with mcp-go's defaults (server/discover
// first) and checks it settled on 2026-07-28 without a session.
func modernInitialized(t *testing.T, c *client.Client) *mcp.InitializeResult {
	t.Helper()
	res := initialized(t, c, "")
	if res.ProtocolVersion != mcp.ProtocolVersion20260728 || c.GetSessionId() != "" {
		t.Fatalf("not the modern era: %q, session %q", res.ProtocolVersion, c.GetSessionId())
	}
	return res
}

// checkModernCancel starts server's block tool and, once the upstream runs
// it, ends the call's context: over HTTP the client closes the request's
// stream (the 2026-07-28 cancellation), over stdio it sends
// notifications/cancelled. The upstream sees its call cancelled, and the
// client keeps working (for a stdio upstream, the same process);
// notified says whether the upstream gets notifications/cancelled: over
// stdio it does; a modern HTTP upstream is cancelled by the aborted POST
// alone (the 2026-07-28 transport sends no notification).
func checkModernCancel(t *testing.T, c *client.Client, server string, notified bool) {
	t.Helper()
	pid := whoamiPid(t, c, server+"_whoami")
	before := cancellations(t, c, server+"_cancellations")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var req mcp.CallToolRequest
		req.Params.Name = server + "_block"
		_, err := c.CallTool(ctx, req)
		done <- err
	}()
	testkit.Eventually(t, 60*time.Second, server+": the upstream to run the block call", func() bool {
		return cancellations(t, c, server+"_cancellations").InFlight > before.InFlight
	})
	cancel()
	if err := testkit.Receive(t, 60*time.Second, server+": the cancelled call to return", done); err == nil {
		t.Errorf("%s: the cancelled call succeeded", server)
	}
	testkit.Eventually(t, 60*time.Second, server+": the upstream to see its block call cancelled", func() bool {
		after := cancellations(t, c, server+"_cancellations")
		return after.Blocked > before.Blocked && (!notified || after.Notified > before.Notified)
	})
	if after := whoamiPid(t, c, server+"_whoami"); after != pid {
		t.Errorf("%s: the upstream process changed across the cancellation: pid %d, then %d", server, pid, after)
	}
}

// listChangedSignal opens a subscriptions/listen stream on c (Listen)
// and returns a channel that fires on each tools/list_changed.
func listChangedSignal(t *testing.T, c *client.Client) <-chan struct{} {
	t.Helper()
	changed := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { t.Errorf("listen: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return changed
}

// TestMCPModernEraOverARealStack drives `mcpbus dev` with mcp-go's default
// clients, which speak 2026-07-28: over /mcp and over `mcpbus stdio`,
// discover (versions, private caching, no session), tools/list, calls to a stdio and
// an HTTP upstream, progress before the result, cancellation reaching the
// upstream, list_changed through subscriptions/listen after a cache reset;
// over HTTP a header mismatch is a 400 with -32020 and GET a 405. A legacy
// client on the same endpoint keeps its session.
func TestMCPModernEraOverARealStack(t *testing.T) {
	t.Parallel()
	st := startMCPStack(t)

	tr, err := transport.NewStreamableHTTP(st.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + mcpAliceKey}))
	if err != nil {
		t.Fatal(err)
	}
	alice := client.NewClient(tr)
	t.Cleanup(func() { _ = alice.Close() })
	if err := alice.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	log := watchProgress(alice)
	modernInitialized(t, alice)
	testkit.Eventually(t, 60*time.Second, "both servers in alice's catalog", func() bool {
		names := listedNames(t, alice)
		return slices.Contains(names, "demo_progress") && slices.Contains(names, "demohttp_progress")
	})
	if d, err := alice.Discover(context.Background(), mcp.DiscoverRequest{}); err != nil || len(d.SupportedVersions) == 0 || d.SupportedVersions[0] != mcp.ProtocolVersion20260728 || d.CacheScope != mcp.CacheScopePrivate {
		t.Errorf("discover: %+v %v", d, err)
	}
	if text, isErr := callText(t, alice, "demo_echo", map[string]any{"message": "modern"}); isErr || !strings.Contains(text, "modern") {
		t.Errorf("demo_echo: %q %v", text, isErr)
	}
	checkProgress(t, alice, log, "demo_progress", "modern-stdio")
	checkProgress(t, alice, log, "demohttp_progress", "modern-http")
	checkModernCancel(t, alice, "demo", true)
	checkModernCancel(t, alice, "demohttp", false)
	awaitListChanged(t, st, listChangedSignal(t, alice))

	// The mirrored headers are checked against the body.
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo_echo","arguments":{"message":"x"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, st.base+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + mcpAliceKey, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "demo_progress"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&reply)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || reply.Error == nil || reply.Error.Code != -32020 {
		t.Errorf("Mcp-Name mismatch: %d %+v", resp.StatusCode, reply.Error)
	}
	get, _ := http.NewRequest(http.MethodGet, st.base+"/mcp", nil)
	get.Header.Set("Authorization", "Bearer "+mcpAliceKey)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	if resp, err := http.DefaultClient.Do(get); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("modern GET: %d", resp.StatusCode)
	}

	// A legacy client beside it keeps its session.
	legacyTr, err := transport.NewStreamableHTTP(st.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + mcpBobKey}))
	if err != nil {
		t.Fatal(err)
	}
	bob := client.NewClient(legacyTr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = bob.Close() })
	if err := bob.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := initialized(t, bob, mcp.ProtocolVersion20251125); res.ProtocolVersion != mcp.ProtocolVersion20251125 || bob.GetSessionId() == "" {
		t.Errorf("legacy client: %q, session %q", res.ProtocolVersion, bob.GetSessionId())
	}
	if text, isErr := callText(t, bob, "demo_echo", map[string]any{"message": "legacy"}); isErr || !strings.Contains(text, "legacy") {
		t.Errorf("legacy demo_echo: %q %v", text, isErr)
	}

	// `mcpbus stdio`: no headers, _meta decides.
	inDir := transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Dir, cmd.Env = st.dir, append(os.Environ(), env...)
		return cmd, nil
	})
	stdio := client.NewClient(transport.NewStdioWithOptions(mcpbusBin, nil, []string{"stdio", "--nats-url", st.natsURL, "--user", "alice", "--thread", "modern"}, inDir))
	t.Cleanup(func() { _ = stdio.Close() })
	if err := stdio.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stdioLog := watchProgress(stdio)
	modernInitialized(t, stdio)
	if names := listedNames(t, stdio); !slices.Contains(names, "demo_progress") {
		t.Errorf("stdio tools/list: %v", names)
	}
	checkProgress(t, stdio, stdioLog, "demo_progress", "modern-over-stdio")
	checkModernCancel(t, stdio, "demo", true)
	awaitListChanged(t, st, listChangedSignal(t, stdio))
}
