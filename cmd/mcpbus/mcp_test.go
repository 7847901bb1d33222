package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

const (
	mcpAliceKey = "mcp-alice-key-0001"
	mcpBobKey   = "mcp-bob-key-0002"
)

func sha(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }

// mcpStack is `mcpbus dev` with two users' keys, the demo server over stdio
// and over streamable HTTP (a task toolset on the latter), and tools/list
// pages of two.
type mcpStack struct {
	dir, base, natsURL, demoURL string
}

func startMCPStack(t *testing.T) *mcpStack {
	t.Helper()
	dir := t.TempDir()
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-http", demoBin, "-transport", "http", "-addr", demoAddr)
	st := &mcpStack{dir: dir, demoURL: "http://" + demoAddr + "/mcp"}
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	st.base = "http://" + apiAddr
	ext := fmt.Sprintf(`{"mcpServers": {
		"demo": {"type": "stdio", "command": %q},
		"demohttp": {"type": "http", "url": %q, "task_toolsets": [
			{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}
	}}`, demoBin, st.demoURL)
	settings := fmt.Sprintf(`api:
  listen: %s
  mcp:
    page_size: 2
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
mcp_tasks:
  enabled: true
egress:
  allow: ["127.0.0.1"] # alice's personal connection is the local demo server
`, apiAddr, sha(mcpAliceKey), sha(mcpBobKey))
	dev := startDevIn(t, dir, ext, settings)
	t.Cleanup(func() { dev.stop(t) })
	st.natsURL = devNATSURL(t, dir)
	return st
}

func initialized(t *testing.T, c *client.Client, version string) *mcp.InitializeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: version,
		ClientInfo: mcp.Implementation{Name: "mcpbus-test", Version: "1"}}})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

func listedNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// callText calls a tool and returns its text and isError.
// callError calls name without arguments and returns the JSON-RPC error
// it must fail with.
func callError(t *testing.T, c *client.Client, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = name
	res, err := c.CallTool(ctx, req)
	if err == nil {
		t.Fatalf("tools/call %s: a result, want an error: %+v", name, res)
	}
	return err
}

func callText(t *testing.T, c *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var sb strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String(), res.IsError
}

// TestMCPEndpointOverARealStack drives `mcpbus dev` with real MCP clients:
// mcp-go's streamable HTTP client (initialize, tools/list in pages with the
// task toolset's internal tools left out, a stdio and an HTTP upstream
// call, a tool error as isError), a personal connection visible to its
// owner only, mcp-go's legacy SSE client, `mcpbus stdio` driven by mcp-go's
// stdio client, and 401 without a key.
func TestMCPEndpointOverARealStack(t *testing.T) {
	t.Parallel()
	st := startMCPStack(t)

	req, _ := http.NewRequest(http.MethodPost, st.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no key: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	streamable := func(key string, opts ...transport.StreamableHTTPCOption) *client.Client {
		tr, err := transport.NewStreamableHTTP(st.base+"/mcp", append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))...)
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		initialized(t, c, mcp.ProtocolVersion20251125)
		return c
	}
	alice := streamable(mcpAliceKey)
	var names []string
	testkit.Eventually(t, 60*time.Second, "both servers in alice's catalog", func() bool {
		names = listedNames(t, alice)
		return slices.Contains(names, "demo_echo") && slices.Contains(names, "demohttp_echo")
	})
	page, err := alice.ListToolsByPage(context.Background(), mcp.ListToolsRequest{})
	if err != nil || len(page.Tools) != 2 || page.NextCursor == "" {
		t.Fatalf("first page: %v %v", page, err)
	}
	if !slices.Contains(names, "demohttp_submit_report") || slices.Contains(names, "demohttp_get_report_status") || slices.Contains(names, "demohttp_cancel_report") {
		t.Errorf("task toolset tools as listed: %v", names)
	}
	if text, isErr := callText(t, alice, "demo_echo", map[string]any{"message": "over stdio"}); isErr || text != "over stdio" {
		t.Errorf("stdio upstream: %q %v", text, isErr)
	}
	if text, isErr := callText(t, alice, "demohttp_add", map[string]any{"a": 2, "b": 3}); isErr || text != "5" {
		t.Errorf("http upstream: %q %v", text, isErr)
	}
	if _, isErr := callText(t, alice, "demo_fail", map[string]any{}); !isErr {
		t.Error("a failing tool is not an isError result")
	}

	// alice's personal connection is in her catalog only.
	body := fmt.Sprintf(`{"name": "mine", "server": {"type": "http", "url": %q}}`, st.demoURL)
	preq, _ := http.NewRequest(http.MethodPost, st.base+"/api/mcp/personal-connections", strings.NewReader(body))
	preq.Header.Set("Authorization", "Bearer "+mcpAliceKey)
	preq.Header.Set("Content-Type", "application/json")
	presp, err := http.DefaultClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	presp.Body.Close()
	if presp.StatusCode != http.StatusCreated {
		t.Fatalf("personal connection: %d", presp.StatusCode)
	}
	personal := func(names []string) string {
		for _, n := range names {
			if strings.HasPrefix(n, "p_") && strings.HasSuffix(n, "_whoami") {
				return n
			}
		}
		return ""
	}
	var mine string
	testkit.Eventually(t, 60*time.Second, "alice's personal tools in her MCP catalog", func() bool {
		mine = personal(listedNames(t, alice))
		return mine != ""
	})
	if text, isErr := callText(t, alice, mine, map[string]any{}); isErr || text == "" {
		t.Errorf("personal tool call: %q %v", text, isErr)
	}
	bob := streamable(mcpBobKey)
	if p := personal(listedNames(t, bob)); p != "" {
		t.Errorf("bob sees alice's personal tool %s", p)
	}
	// For bob it is an unknown tool: JSON-RPC invalid params that says
	// what to do.
	if err := callError(t, bob, mine); !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), "tools/list") {
		t.Errorf("bob calling alice's personal tool: %v", err)
	}

	// A cache reset reaches a listening client as list_changed.
	changed := make(chan struct{}, 1)
	listening := streamable(mcpBobKey, transport.WithContinuousListening())
	listening.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	awaitListChanged(t, st, changed)

	// The 2024-11-05 transport.
	sse, err := client.NewSSEMCPClient(st.base+"/sse", transport.WithHeaders(map[string]string{"Authorization": "Bearer " + mcpBobKey}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sse.Close() })
	if err := sse.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if init := initialized(t, sse, mcp.ProtocolVersion20241105); init.ProtocolVersion != mcp.ProtocolVersion20241105 {
		t.Errorf("SSE negotiated %s", init.ProtocolVersion)
	}
	if text, isErr := callText(t, sse, "demohttp_echo", map[string]any{"message": "over sse"}); isErr || text != "over sse" {
		t.Errorf("SSE call: %q %v", text, isErr)
	}

	// `mcpbus stdio` as alice, over NATS.
	// (client.NewStdioMCPClient skips Client.Start, which installs the
	// notification handler.)
	stdio := mcpbusStdio(t, st.dir, st.natsURL, "alice", "desk")
	initialized(t, stdio, mcp.ProtocolVersion20251125)
	names = listedNames(t, stdio)
	if !slices.Contains(names, "demo_echo") || personal(names) != mine {
		t.Errorf("mcpbus stdio listed %v", names)
	}
	if text, isErr := callText(t, stdio, "demo_echo", map[string]any{"message": "over mcpbus stdio"}); isErr || text != "over mcpbus stdio" {
		t.Errorf("mcpbus stdio call: %q %v", text, isErr)
	}
	if text, isErr := callText(t, stdio, "demohttp_add", map[string]any{"a": 1, "b": 1}); isErr || text != "2" {
		t.Errorf("mcpbus stdio http call: %q %v", text, isErr)
	}
	stdioChanged := make(chan struct{}, 1)
	stdio.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case stdioChanged <- struct{}{}:
			default:
			}
		}
	})
	awaitListChanged(t, st, stdioChanged)
}

// awaitListChanged resets the cache until changed fires: until a client's
// stream is open a reset reaches nobody, so it resets again.
func awaitListChanged(t *testing.T, st *mcpStack, changed <-chan struct{}) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, "list_changed after a cache reset", func() bool {
		reset := exec.Command(mcpbusBin, "cache", "reset", "--nats-url", st.natsURL)
		reset.Dir = st.dir // where the dev process's .mcpbus/nats.token is
		if out, err := reset.CombinedOutput(); err != nil {
			t.Fatalf("cache reset: %v %s", err, out)
		}
		select {
		case <-changed:
			return true
		case <-time.After(3 * time.Second):
			return false
		}
	})
}

// mcpbusStdio starts `mcpbus stdio` as user on thread and an mcp-go client
// over it (not initialized). It runs in dir, next to the dev process's
// .mcpbus/, as an operator's would, so it finds the embedded NATS server's
// token there.
func mcpbusStdio(t *testing.T, dir, natsURL, user, thread string) *client.Client {
	t.Helper()
	inDir := transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		return cmd, nil
	})
	c := client.NewClient(transport.NewStdioWithOptions(mcpbusBin, nil, []string{"stdio", "--nats-url", natsURL, "--user", user, "--thread", thread}, inDir),
		client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}
