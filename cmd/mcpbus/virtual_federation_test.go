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
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

const (
	vfKeyA     = "vf-agent-a-key-0001"
	vfKeyAdmin = "vf-admin-key-0002"
)

// TestVirtualServerResourcesAndPrompts: two federating demo servers, a
// and b, and a virtual server per server. A key bound to set-a lists,
// reads and gets only a's resources and prompts; b's are forbidden by
// every transport (REST, /mcp in both eras, /sse, stdio, NATS), and so is
// anything without a set.
func TestVirtualServerResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t).WithUserSubjects(true)
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	demoSrv := func(instance string) string {
		return fmt.Sprintf(`{"type": "stdio", "command": %q, "args": ["-federation"], "env": {"DEMO_INSTANCE": %q}, "tool_name_prefix": true}`, demoBin, instance)
	}
	ext := fmt.Sprintf(`{"mcpServers": {"a": %s, "b": %s}}`, demoSrv("A"), demoSrv("B"))
	settings := natsSettings(natsURL, names) + `  identities:
    - {user_id: worker-a, virtual_servers: [set-a]}
` + fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user, virtual_servers: [set-a]}
    - {sha256: %s, user_id: root, role: admin}
virtual_servers:
  - {name: set-a, servers: [a]}
  - {name: set-b, servers: [b]}
`, apiAddr, sha(vfKeyA), sha(vfKeyAdmin))
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProcess(t, dir, "discovery", mcpbusBin, "serve", "discovery")
	startProcess(t, dir, "toolcall", mcpbusBin, "serve", "toolcall")
	startProcess(t, dir, "api", mcpbusBin, "serve", "api")
	waitHealthy(t, natsURL, names, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceAPI)
	base := "http://" + apiAddr
	bURI, aURI := "mcpbus://b/demo://greeting", "mcpbus://a/demo://greeting"
	testkit.Eventually(t, 60*time.Second, "both servers' resources listed", func() bool {
		_, _, body := vsREST(t, base, vfKeyAdmin, http.MethodGet, "/api/mcp/resources", nil)
		return strings.Contains(string(body), aURI) && strings.Contains(string(body), bURI)
	})

	t.Run("REST", func(t *testing.T) {
		status, _, body := vsREST(t, base, vfKeyA, http.MethodGet, "/api/mcp/resources?virtual=set-a", nil)
		if status != http.StatusOK || !strings.Contains(string(body), aURI) || strings.Contains(string(body), "mcpbus://b/") {
			t.Errorf("set-a's resources: %d %s; want a's only", status, body)
		}
		status, _, body = vsREST(t, base, vfKeyA, http.MethodGet, "/api/mcp/prompts?virtual=set-a", nil)
		if status != http.StatusOK || !strings.Contains(string(body), `"a_greet"`) || strings.Contains(string(body), `"b_greet"`) {
			t.Errorf("set-a's prompts: %d %s; want a_greet only", status, body)
		}
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/api/mcp/resources", nil},
			{http.MethodGet, "/api/mcp/resources?virtual=set-b", nil},
			{http.MethodGet, "/api/mcp/prompts", nil},
			{http.MethodPost, "/api/mcp/resources/read", map[string]any{"uri": aURI}},
			{http.MethodPost, "/api/mcp/resources/read?virtual=set-a", map[string]any{"uri": bURI}},
			{http.MethodPost, "/api/mcp/resources/read?virtual=set-a", map[string]any{"uri": "mcpbus://b/demo://notes/x"}},
			{http.MethodGet, "/api/mcp/prompts/b_greet?virtual=set-a", nil},
			{http.MethodPost, "/api/mcp/prompts/b_greet?virtual=set-a", map[string]any{"arguments": map[string]any{"name": "x"}}},
			{http.MethodPost, "/api/mcp/prompts/a_greet", map[string]any{"arguments": map[string]any{"name": "x"}}},
			{http.MethodPost, "/api/mcp/completion?virtual=set-a", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "b_greet"}, "argument": map[string]any{"name": "name", "value": "P"}}},
		} {
			status, _, body := vsREST(t, base, vfKeyA, c.method, c.path, c.body)
			if status != http.StatusForbidden && status != http.StatusNotFound {
				t.Errorf("%s %s %v as alice: %d %s; want 403", c.method, c.path, c.body, status, body)
			} else if status == http.StatusNotFound && !strings.Contains(c.path, "/prompts/b_greet") {
				t.Errorf("%s %s: 404 %s; want 403", c.method, c.path, body)
			}
		}
		status, _, body = vsREST(t, base, vfKeyA, http.MethodPost, "/api/mcp/resources/read?virtual=set-a", map[string]any{"uri": aURI})
		if status != http.StatusOK || !strings.Contains(string(body), "hello from A") {
			t.Errorf("reading a's greeting through set-a: %d %s", status, body)
		}
		status, _, body = vsREST(t, base, vfKeyA, http.MethodPost, "/api/mcp/prompts/a_greet?virtual=set-a", map[string]any{"arguments": map[string]any{"name": "Paris"}})
		if status != http.StatusOK || !strings.Contains(string(body), "Hello, Paris!") {
			t.Errorf("a_greet through set-a: %d %s", status, body)
		}
	})

	t.Run("audit", func(t *testing.T) {
		// The reads through set-a are audited with the set and the
		// decision: allowed, or the policy that refused.
		testkit.Eventually(t, 30*time.Second, "audit records of alice's reads through set-a", func() bool {
			_, _, body := vsREST(t, base, vfKeyAdmin, http.MethodGet, "/api/mcp/audit?user=alice&kind=call&limit=500", nil)
			var reply struct {
				Records []struct {
					Tool, Policy  string
					VirtualServer string `json:"virtual_server"`
				} `json:"records"`
			}
			if json.Unmarshal(body, &reply) != nil {
				return false
			}
			seen := map[string]bool{}
			for _, r := range reply.Records {
				if r.VirtualServer == "set-a" && strings.HasPrefix(r.Tool, "resources/read ") {
					seen[r.Policy] = true
				}
			}
			return seen["allowed"] && seen["virtual_servers"]
		})
	})

	t.Run("MCP", func(t *testing.T) {
		clients := map[string]*client.Client{
			"legacy": vsStreamable(t, base+"/mcp/v/set-a", vfKeyA, mcp.ProtocolVersion20251125),
			"modern": vsStreamable(t, base+"/mcp/v/set-a", vfKeyA, ""),
			"sse":    vsSSE(t, base+"/sse/v/set-a", vfKeyA),
			"stdio":  vsStdio(t, dir, natsURL, names, "alice", "set-a"),
		}
		for era, c := range clients {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
			if err != nil {
				t.Fatalf("%s: resources/list: %v", era, err)
			}
			var uris []string
			for _, r := range res.Resources {
				uris = append(uris, r.URI)
			}
			if !slices.Contains(uris, aURI) || slices.ContainsFunc(uris, func(u string) bool { return strings.HasPrefix(u, "mcpbus://b/") }) {
				t.Errorf("%s: resources/list %v; want a's only", era, uris)
			}
			prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
			if err != nil {
				t.Fatalf("%s: prompts/list: %v", era, err)
			}
			var pnames []string
			for _, p := range prompts.Prompts {
				pnames = append(pnames, p.Name)
			}
			if !slices.Contains(pnames, "a_greet") || slices.Contains(pnames, "b_greet") {
				t.Errorf("%s: prompts/list %v; want a_greet, not b_greet", era, pnames)
			}
			for _, uri := range []string{bURI, "mcpbus://b/demo://notes/x"} {
				if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}}); err == nil || !strings.Contains(err.Error(), "set-a") {
					t.Errorf("%s: resources/read %s = %v; want refused naming set-a", era, uri, err)
				}
			}
			if _, err := c.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "b_greet", Arguments: map[string]string{"name": "x"}}}); err == nil {
				t.Errorf("%s: prompts/get b_greet through set-a answered", era)
			}
			if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: aURI}}); err != nil {
				t.Errorf("%s: resources/read %s: %v", era, aURI, err)
			}
			cancel()
		}
	})

	t.Run("NATS", func(t *testing.T) {
		nc, err := nats.Connect(natsURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = bus.Request[bus.ResourcesReadReply](ctx, nc, names.ResourcesRead(), bus.ResourcesReadRequest{URI: bURI, UserID: "alice", VirtualServer: "set-a"})
		if be := bus.AsError(err); err == nil || be.Code != bus.CodeForbidden {
			t.Errorf("NATS resources.read of b's greeting through set-a: %v; want forbidden", err)
		}
		_, err = bus.Request[bus.PromptsGetReply](ctx, nc, names.PromptsGet(), bus.PromptsGetRequest{Name: "b_greet", UserID: "alice", VirtualServer: "set-a"})
		if be := bus.AsError(err); err == nil || be.Code != bus.CodeForbidden {
			t.Errorf("NATS prompts.get b_greet through set-a: %v; want forbidden", err)
		}
		// A NATS identity bound to set-a (nats.identities), on its
		// per-user subjects (answered on its own inboxes): nothing
		// without its set, nothing of b's through it.
		worker, err := nats.Connect(natsURL, nats.CustomInboxPrefix(strings.TrimSuffix(bus.UserInboxPrefix("worker-a"), ".")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(worker.Close)
		for _, c := range []struct {
			what string
			err  error
		}{
			{"read without a set", func() error {
				_, err := bus.Request[bus.ResourcesReadReply](ctx, worker, names.User("worker-a", bus.VerbResourcesRead), bus.ResourcesReadRequest{URI: aURI})
				return err
			}()},
			{"read of b's through set-a", func() error {
				_, err := bus.Request[bus.ResourcesReadReply](ctx, worker, names.User("worker-a", bus.VerbResourcesRead), bus.ResourcesReadRequest{URI: bURI, VirtualServer: "set-a"})
				return err
			}()},
			{"prompts list of set-b", func() error {
				_, err := bus.Request[bus.PromptsListReply](ctx, worker, names.User("worker-a", bus.VerbPromptsList), bus.FedListRequest{VirtualServer: "set-b"})
				return err
			}()},
			{"resources list without a set", func() error {
				_, err := bus.Request[bus.ResourcesListReply](ctx, worker, names.User("worker-a", bus.VerbResourcesList), bus.FedListRequest{})
				return err
			}()},
			{"prompt get of b's through set-a", func() error {
				_, err := bus.Request[bus.PromptsGetReply](ctx, worker, names.User("worker-a", bus.VerbPromptsGet), bus.PromptsGetRequest{Name: "b_greet", VirtualServer: "set-a"})
				return err
			}()},
		} {
			if be := bus.AsError(c.err); c.err == nil || be.Code != bus.CodeForbidden {
				t.Errorf("worker-a %s: %v; want forbidden", c.what, c.err)
			}
		}
		if _, err := bus.Request[bus.ResourcesReadReply](ctx, worker, names.User("worker-a", bus.VerbResourcesRead), bus.ResourcesReadRequest{URI: aURI, VirtualServer: "set-a"}); err != nil {
			t.Errorf("worker-a reading a's greeting through set-a: %v", err)
		}
		list, err := bus.Request[bus.PromptsListReply](ctx, nc, names.PromptsList(), bus.FedListRequest{UserID: "alice", VirtualServer: "set-b"})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(list.Prompts)
		if !strings.Contains(string(raw), `"b_greet"`) || strings.Contains(string(raw), `"a_greet"`) {
			t.Errorf("NATS prompts.list through set-b: %s; want b_greet only", raw)
		}
	})
}
