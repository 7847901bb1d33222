package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// Keys of the virtual server test: agent A's key is bound to the virtual
// server agent-a, agent B's to agent-b; the admin's to none.
const (
	vsKeyA     = "vs-agent-a-key-0001"
	vsKeyB     = "vs-agent-b-key-0002"
	vsKeyAdmin = "vs-admin-key-0003"
)

// TestVirtualServersAcrossReplicas runs discovery, two toolcall and two api
// replicas (serve mode, one NATS) with two virtual servers over the demo
// server: agent-a holds echo (shown as "say", with its own description
// and annotations, 3 calls an hour per caller) and add; agent-b holds the
// tools matching demo_w* (weather, whoami). A key bound to agent-a cannot
// list or call agent-b's tools, nor a tool outside both, by any name form
// (visible, raw name of an overridden tool, the other set's name) or
// transport (REST, /mcp in both eras, /sse, stdio, NATS per-user subjects
// under nats.identities); the quota holds across the replicas: three calls,
// then 429 with Retry-After, then an MCP error result naming the limit.
func TestVirtualServersAcrossReplicas(t *testing.T) {
	t.Parallel()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t).WithUserSubjects(true)
	dir := t.TempDir()
	apiA, apiB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin)
	settings := natsSettings(natsURL, names) + `  identities:
    - {user_id: worker-b, virtual_servers: [agent-b]}
` + fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user, virtual_servers: [agent-a]}
    - {sha256: %s, user_id: bob, role: user, virtual_servers: [agent-b]}
    - {sha256: %s, user_id: root, role: admin}
virtual_servers:
  - name: agent-a
    servers: [demo]
    tools: [demo_echo, demo_add]
    overrides:
      demo_echo:
        name: say
        description: Say something back.
        annotations: {readOnlyHint: true}
    quotas:
      - {tools: [say], calls: 3, interval_seconds: 3600}
  - name: agent-b
    servers: [demo]
    tools: ["demo_w*"]
    pinning: log
  - name: agent-q
    servers: [demo]
    tools: [demo_add]
    quotas:
      - {calls: 2, interval_seconds: 2}
`, apiA, sha(vsKeyA), sha(vsKeyB), sha(vsKeyAdmin))
	startReplicated(t, dir, natsURL, names, ext, settings, apiB)
	bases := []string{"http://" + apiA, "http://" + apiB}
	for _, base := range bases {
		testkit.Eventually(t, 60*time.Second, base+" to list agent-a", func() bool {
			status, _, body := vsREST(t, base, vsKeyA, http.MethodGet, "/api/mcp/tools?virtual=agent-a", nil)
			return status == http.StatusOK && strings.Contains(string(body), `"say"`)
		})
	}

	t.Run("REST", func(t *testing.T) {
		// The set's view: the override applies, nothing else shows.
		_, _, body := vsREST(t, bases[0], vsKeyA, http.MethodGet, "/api/mcp/tools?virtual=agent-a", nil)
		var list bus.ToolsListReply
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range list.Tools {
			got = append(got, tl.Name)
			if tl.Name == "say" && (tl.Description != "Say something back." || !strings.Contains(string(tl.Annotations), `"readOnlyHint":true`) || tl.OriginalName != "echo") {
				t.Errorf("say = %+v; want the override's description and annotations", tl)
			}
		}
		if !slices.Equal(got, []string{"demo_add", "say"}) {
			t.Errorf("agent-a lists %v; want [demo_add say]", got)
		}
		// Bound key: the whole catalog and the other set are forbidden.
		for _, path := range []string{"/api/mcp/tools", "/api/mcp/tools?virtual=agent-b", "/api/mcp/tools?virtual=nope"} {
			status, _, body := vsREST(t, bases[1], vsKeyA, http.MethodGet, path, nil)
			if status != http.StatusForbidden || !strings.Contains(string(body), "api.keys[].virtual_servers") {
				t.Errorf("GET %s as agent A: %d %s; want 403 naming the policy", path, status, body)
			}
		}
		// Calls by every name form outside the set.
		for _, c := range []struct{ path, why string }{
			{"/api/mcp/tools/demo_whoami/call?virtual=agent-a", "agent-b's tool through agent-a"},
			{"/api/mcp/tools/demo_echo/call?virtual=agent-a", "the raw name of an overridden tool"},
			{"/api/mcp/tools/demo_fail/call?virtual=agent-a", "a tool in no set"},
			{"/api/mcp/tools/demo_whoami/call?virtual=agent-b", "the other set"},
			{"/api/mcp/tools/demo_whoami/call", "the whole catalog"},
		} {
			// promoted names the tool too, as a promotion of tool_search
			// in another set would.
			status, _, body := vsREST(t, bases[0], vsKeyA, http.MethodPost, c.path, map[string]any{"arguments": map[string]any{}, "promoted": []string{"demo_whoami", "demo_echo"}})
			if status != http.StatusForbidden {
				t.Errorf("%s (%s): %d %s; want 403", c.why, c.path, status, body)
			}
		}
		// An unbound admin key may use either set and the whole catalog,
		// but a set still holds what it holds.
		if status, _, body := vsREST(t, bases[0], vsKeyAdmin, http.MethodPost, "/api/mcp/tools/demo_add/call?virtual=agent-b", map[string]any{"arguments": map[string]any{"a": 1, "b": 2}}); status != http.StatusForbidden ||
			!strings.Contains(string(body), "not in virtual server 'agent-b'") {
			t.Errorf("admin calling demo_add through agent-b: %d %s; want 403 naming the set", status, body)
		}
		if status, _, body := vsREST(t, bases[0], vsKeyAdmin, http.MethodPost, "/api/mcp/tools/demo_add/call", map[string]any{"arguments": map[string]any{"a": 1, "b": 2}}); status != http.StatusOK {
			t.Errorf("admin calling demo_add on the whole catalog: %d %s", status, body)
		}
		if status, _, body := vsREST(t, bases[1], vsKeyB, http.MethodPost, "/api/mcp/tools/demo_whoami/call?virtual=agent-b", map[string]any{"arguments": map[string]any{}}); status != http.StatusOK {
			t.Errorf("agent B calling demo_whoami: %d %s", status, body)
		}
		// The admin view of the sets, pinning included; not for agents.
		if status, _, body := vsREST(t, bases[1], vsKeyAdmin, http.MethodGet, "/api/mcp/virtual-servers", nil); status != http.StatusOK ||
			!strings.Contains(string(body), `"name":"agent-b"`) || !strings.Contains(string(body), `"pinning":"log"`) || !strings.Contains(string(body), `"interval_seconds":3600`) {
			t.Errorf("GET /api/mcp/virtual-servers as admin: %d %s", status, body)
		}
		if status, _, _ := vsREST(t, bases[1], vsKeyA, http.MethodGet, "/api/mcp/virtual-servers", nil); status != http.StatusForbidden {
			t.Errorf("GET /api/mcp/virtual-servers as agent A: %d; want 403", status)
		}
	})

	t.Run("MCP", func(t *testing.T) {
		// The bound key at the default endpoint and at the other set's.
		for _, path := range []string{"/mcp", "/mcp/v/agent-b", "/sse", "/sse/v/agent-b"} {
			method := http.MethodPost
			if strings.HasPrefix(path, "/sse") {
				method = http.MethodGet
			}
			status, _, body := vsREST(t, bases[0], vsKeyA, method, path, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
			if status != http.StatusForbidden || !strings.Contains(string(body), "agent-a") {
				t.Errorf("%s %s as agent A: %d %s; want 403", method, path, status, body)
			}
		}
		clients := map[string]*client.Client{
			"legacy": vsStreamable(t, bases[0]+"/mcp/v/agent-a", vsKeyA, mcp.ProtocolVersion20251125),
			"modern": vsStreamable(t, bases[1]+"/mcp/v/agent-a", vsKeyA, ""),
			"sse":    vsSSE(t, bases[1]+"/sse/v/agent-a", vsKeyA),
			"stdio":  vsStdio(t, dir, natsURL, names, "alice", "agent-a"),
		}
		for era, c := range clients {
			if got := listedNames(t, c); !slices.Equal(got, []string{"demo_add", "say"}) {
				t.Errorf("%s: tools/list %v; want [demo_add say]", era, got)
			}
			for _, name := range []string{"demo_whoami", "demo_echo", "demo_fail"} {
				if text, isErr := callText(t, c, name, map[string]any{"message": "x"}); !isErr || !strings.Contains(text, "forbidden") {
					t.Errorf("%s: tools/call %s = %q (isError %v); want forbidden", era, name, text, isErr)
				}
			}
			if text, isErr := callText(t, c, "demo_add", map[string]any{"a": 2, "b": 3}); isErr || !strings.Contains(text, "5") {
				t.Errorf("%s: demo_add = %q %v", era, text, isErr)
			}
		}
		// tool_search searches the set only: it finds and promotes
		// nothing of agent-b's.
		if text, _ := callText(t, clients["legacy"], "tool_search", map[string]any{"query": "select:demo_whoami"}); strings.Contains(text, "working directory") {
			t.Errorf("tool_search in agent-a found agent-b's tool: %q", text)
		}
		// A session initialized on agent-a does not serve agent-b's path,
		// even to a key that may use agent-b.
		sid := clients["legacy"].GetSessionId()
		req, _ := http.NewRequest(http.MethodPost, bases[0]+"/mcp/v/agent-b", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+vsKeyA)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
			t.Errorf("agent-a's session at /mcp/v/agent-b: %d; want 403", resp.StatusCode)
		}
	})

	t.Run("NATS", func(t *testing.T) {
		// An agent worker bound to its user: replies come to its own
		// inbox prefix (bus.UserInboxPrefix).
		nc, err := nats.Connect(natsURL, nats.CustomInboxPrefix(strings.TrimSuffix(bus.UserInboxPrefix("worker-b"), ".")))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		call := func(set, tool string) error {
			_, err := bus.Request[bus.ToolsCallReply](ctx, nc, names.User("worker-b", bus.VerbToolsCall),
				bus.Call{Tool: tool, VirtualServer: set, Arguments: json.RawMessage(`{}`)})
			return err
		}
		for _, c := range []struct{ set, tool string }{{"", "demo_echo"}, {"agent-a", "say"}, {"agent-b", "demo_echo"}, {"agent-b", "demo_add"}} {
			if err := call(c.set, c.tool); bus.AsError(err).Code != bus.CodeForbidden {
				t.Errorf("worker-b calling %s through %q: %v; want forbidden", c.tool, c.set, err)
			}
		}
		if err := call("agent-b", "demo_whoami"); err != nil {
			t.Errorf("worker-b calling demo_whoami through agent-b: %v", err)
		}
		list, err := bus.Request[bus.ToolsListReply](ctx, nc, names.User("worker-b", bus.VerbToolsList), bus.ToolsListRequest{VirtualServer: "agent-b"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range list.Tools {
			got = append(got, tl.Name)
		}
		if !slices.Equal(got, []string{"demo_weather", "demo_whoami"}) {
			t.Errorf("worker-b lists %v through agent-b", got)
		}
		if _, err := bus.Request[bus.ToolsListReply](ctx, nc, names.User("worker-b", bus.VerbToolsList), bus.ToolsListRequest{}); bus.AsError(err).Code != bus.CodeForbidden {
			t.Errorf("worker-b listing the whole catalog: %v; want forbidden", err)
		}
		if _, err := bus.Request[bus.ToolsSearchReply](ctx, nc, names.User("worker-b", bus.VerbToolsSearch), bus.ToolsSearchRequest{Query: "echo", VirtualServer: "agent-a"}); bus.AsError(err).Code != bus.CodeForbidden {
			t.Errorf("worker-b searching agent-a: %v; want forbidden", err)
		}
	})

	t.Run("quota window resets across replicas", func(t *testing.T) {
		// agent-q allows 2 calls of demo_add per 2-second window. The serve
		// processes keep the real clock (the in-process toolcall test
		// moves an injected one), so this waits on conditions: a refusal
		// (the window is full), then the first allowed call (a new window
		// began), then one more allowed and the next refused, each call by
		// another api replica and so spread over both toolcall replicas.
		// A run whose calls straddle two windows is run again.
		n := 0
		add := func() (int, http.Header, []byte) {
			n++
			return vsREST(t, bases[n%2], vsKeyAdmin, http.MethodPost, "/api/mcp/tools/demo_add/call?virtual=agent-q", map[string]any{"arguments": map[string]any{"a": 1, "b": 2}})
		}
		window := func() int64 { return time.Now().Unix() / 2 }
		testkit.Eventually(t, 60*time.Second, "2 calls allowed in a fresh window and the 3rd refused", func() bool {
			testkit.Eventually(t, 30*time.Second, "a full window", func() bool {
				status, header, body := add()
				if status == http.StatusTooManyRequests && (header.Get("Retry-After") == "" || !strings.Contains(string(body), "virtual_servers[agent-q].quotas[0]")) {
					t.Fatalf("a refusal without Retry-After or the quota's name: %v %s", header, body)
				}
				return status == http.StatusTooManyRequests
			})
			testkit.Eventually(t, 30*time.Second, "the window to reset", func() bool {
				status, _, _ := add()
				return status == http.StatusOK
			})
			w := window()
			second, _, body2 := add()
			third, _, body3 := add()
			if window() != w {
				return false // the calls straddled two windows: again
			}
			if second != http.StatusOK || third != http.StatusTooManyRequests {
				t.Fatalf("in a fresh window: call 2 %d %s, call 3 %d %s; want 200 then 429", second, body2, third, body3)
			}
			return true
		})
	})

	t.Run("quota across replicas", func(t *testing.T) {
		// say allows 3 calls an hour per caller, counted in the quota
		// bucket whichever api and toolcall replica takes the call.
		for i := range 3 {
			status, _, body := vsREST(t, bases[i%2], vsKeyA, http.MethodPost, "/api/mcp/tools/say/call?virtual=agent-a", map[string]any{"arguments": map[string]any{"message": fmt.Sprint("hi ", i)}})
			if status != http.StatusOK || !strings.Contains(string(body), `"tool":"say"`) {
				t.Fatalf("call %d of say: %d %s", i+1, status, body)
			}
		}
		status, header, body := vsREST(t, bases[1], vsKeyA, http.MethodPost, "/api/mcp/tools/say/call?virtual=agent-a", map[string]any{"arguments": map[string]any{"message": "one more"}})
		if status != http.StatusTooManyRequests || header.Get("Retry-After") == "" || !strings.Contains(string(body), "virtual_servers[agent-a].quotas[0]") {
			t.Fatalf("call 4 of say: %d Retry-After %q %s; want 429 naming the quota", status, header.Get("Retry-After"), body)
		}
		c := vsStreamable(t, bases[0]+"/mcp/v/agent-a", vsKeyA, mcp.ProtocolVersion20251125)
		if text, isErr := callText(t, c, "say", map[string]any{"message": "over mcp"}); !isErr || !strings.Contains(text, "quotas[0]") || !strings.Contains(text, "rate_limited") {
			t.Errorf("say over /mcp past the quota: %q %v; want an error result naming the limit", text, isErr)
		}
		// Another caller has a quota of its own.
		if status, _, body := vsREST(t, bases[0], vsKeyAdmin, http.MethodPost, "/api/mcp/tools/say/call?virtual=agent-a", map[string]any{"arguments": map[string]any{"message": "root"}}); status != http.StatusOK {
			t.Errorf("the admin's first call of say: %d %s", status, body)
		}
		// The admin view shows the quota's current window: alice's 3
		// calls and root's 1, two callers, whichever replica counted them.
		type quotaView struct {
			Name       string `json:"name"`
			QuotaState []struct {
				Limit  string `json:"limit"`
				Window struct{ Subjects, Calls int }
			} `json:"quota_state"`
		}
		_, _, viewBody := vsREST(t, bases[1], vsKeyAdmin, http.MethodGet, "/api/mcp/virtual-servers", nil)
		var view struct {
			VirtualServers []quotaView `json:"virtual_servers"`
		}
		if err := json.Unmarshal(viewBody, &view); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(view.VirtualServers, func(v quotaView) bool { return v.Name == "agent-a" })
		if i < 0 || len(view.VirtualServers[i].QuotaState) != 1 || view.VirtualServers[i].QuotaState[0].Window.Calls != 4 ||
			view.VirtualServers[i].QuotaState[0].Window.Subjects != 2 || view.VirtualServers[i].QuotaState[0].Limit != "virtual_servers[agent-a].quotas[0]" {
			t.Errorf("quota state of agent-a: %s; want 4 calls of 2 callers in the window", viewBody)
		}
		// The audit records name the set and the decision.
		want := map[string]bool{"allowed": false, "virtual_servers": false, "virtual_servers[agent-a].quotas[0]": false}
		testkit.Eventually(t, 60*time.Second, "audit records of alice's calls through agent-a", func() bool {
			_, _, body := vsREST(t, bases[1], vsKeyAdmin, http.MethodGet, "/api/mcp/audit?user=alice&kind=call&limit=500", nil)
			var reply struct {
				Records []struct {
					Tool, Outcome, Policy string
					VirtualServer         string `json:"virtual_server"`
				} `json:"records"`
			}
			if json.Unmarshal(body, &reply) != nil {
				return false
			}
			for _, r := range reply.Records {
				if r.VirtualServer == "agent-a" {
					if _, ok := want[r.Policy]; ok {
						want[r.Policy] = true
					}
				}
			}
			return want["allowed"] && want["virtual_servers"] && want["virtual_servers[agent-a].quotas[0]"]
		})
	})
}

// vsREST sends a JSON request with key and returns the status, headers and
// body.
func vsREST(t *testing.T, base, key, method, path string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return 0, nil, []byte(err.Error()) // not listening yet: callers wait or fail on the status
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, resp.Header, nil // an open stream: the status is the answer
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// vsStreamable is an initialized streamable HTTP client of url; version ""
// lets it choose the modern era.
func vsStreamable(t *testing.T, url, key, version string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if version != "" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	c := client.NewClient(tr, opts...)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if version == "" {
		modernInitialized(t, c)
	} else {
		initialized(t, c, version)
	}
	return c
}

// vsSSE is an initialized 2024-11-05 client of url.
func vsSSE(t *testing.T, url, key string) *client.Client {
	t.Helper()
	c, err := client.NewSSEMCPClient(url, transport.WithHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	initialized(t, c, mcp.ProtocolVersion20241105)
	return c
}

// vsStdio is `mcpbus stdio --virtual set` as user, initialized.
func vsStdio(t *testing.T, dir, natsURL string, names bus.Names, user, set string) *client.Client {
	t.Helper()
	inDir := transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		return cmd, nil
	})
	c := client.NewClient(transport.NewStdioWithOptions(mcpbusBin, nil, []string{"stdio", "--nats-url", natsURL, "--namespace", names.Namespace(),
		"--user", user, "--thread", "desk", "--virtual", set}, inDir), client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	initialized(t, c, mcp.ProtocolVersion20251125)
	return c
}
