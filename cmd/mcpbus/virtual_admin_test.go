package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// Keys of the virtual server admin API test.
const (
	vaKeyOps   = "va-ops-agent-key-0001" // bound to ops, a set only the admin API makes
	vaKeyUser  = "va-plain-user-key-0002"
	vaKeyAdmin = "va-admin-key-0003"
)

// TestVirtualServerAdminAPI runs discovery, two toolcall and two api
// replicas (serve mode, one NATS). config.yaml binds a key to the virtual
// server "ops", which only the admin API defines: created through api
// replica A, the key lists and calls its tools through replica B (every
// api and toolcall replica applies the change without a restart); an
// update narrows the set and calls outside it become forbidden; a delete
// leaves the key nothing. A plain user is refused (403), bad input is a
// 422 naming the field, config.yaml's sets are read-only (409), and every
// change is an audit record naming the admin.
func TestVirtualServerAdminAPI(t *testing.T) {
	t.Parallel()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dir := t.TempDir()
	apiA, apiB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin)
	settings := natsSettings(natsURL, names) + fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: opsbot, role: user, virtual_servers: [ops]}
    - {sha256: %s, user_id: dave, role: user}
    - {sha256: %s, user_id: root, role: admin}
virtual_servers:
  - name: fixed
    servers: [demo]
    tools: [demo_echo]
`, apiA, sha(vaKeyOps), sha(vaKeyUser), sha(vaKeyAdmin))
	startReplicated(t, dir, natsURL, names, ext, settings, apiB)
	a, b := "http://"+apiA, "http://"+apiB
	for _, base := range []string{a, b} {
		testkit.Eventually(t, 60*time.Second, base+" to list the catalog", func() bool {
			status, _, body := vsREST(t, base, vaKeyAdmin, http.MethodGet, "/api/mcp/tools", nil)
			return status == http.StatusOK && strings.Contains(string(body), `"demo_echo"`)
		})
	}
	// Before the set exists the bound key can use nothing.
	if status, _, body := vsREST(t, b, vaKeyOps, http.MethodGet, "/api/mcp/tools?virtual=ops", nil); status != http.StatusNotFound {
		t.Fatalf("listing ops before it exists: %d %s; want 404", status, body)
	}

	opsTools := func(base string) (int, []string) {
		status, _, body := vsREST(t, base, vaKeyOps, http.MethodGet, "/api/mcp/tools?virtual=ops", nil)
		var list bus.ToolsListReply
		_ = json.Unmarshal(body, &list)
		var got []string
		for _, tl := range list.Tools {
			got = append(got, tl.Name)
		}
		return status, got
	}
	call := func(base, tool string) (int, string) {
		status, _, body := vsREST(t, base, vaKeyOps, http.MethodPost, "/api/mcp/tools/"+tool+"/call?virtual=ops",
			map[string]any{"arguments": map[string]any{"message": "hi", "a": 2, "b": 3}})
		return status, string(body)
	}

	t.Run("refusals", func(t *testing.T) {
		set := map[string]any{"servers": []string{"demo"}}
		for _, key := range []string{vaKeyUser, vaKeyOps} {
			for _, r := range []struct{ method, path string }{
				{http.MethodGet, "/api/mcp/virtual-servers"}, {http.MethodGet, "/api/mcp/virtual-servers/fixed"},
				{http.MethodPut, "/api/mcp/virtual-servers/ops"}, {http.MethodDelete, "/api/mcp/virtual-servers/fixed"},
			} {
				if status, _, body := vsREST(t, a, key, r.method, r.path, set); status != http.StatusForbidden {
					t.Errorf("%s %s as a plain user: %d %s; want 403", r.method, r.path, status, body)
				}
			}
		}
		for _, c := range []struct {
			name string
			body any
			want string
		}{
			{"ops", map[string]any{"servers": []string{}}, "servers: must name at least one server"},
			{"ops", map[string]any{"servers": []string{"demo"}, "tools": []string{"[a-"}}, "tools[0]: must be a tool name or a glob"},
			{"ops", map[string]any{"servers": []string{"demo"}, "quotas": []map[string]any{{"calls": 3}}}, "quotas[0].interval_seconds: must be between 1 and 86400"},
			{"ops", map[string]any{"servers": []string{"demo"}, "overrides": map[string]any{"demo_echo": map[string]any{"name": "no spaces"}}}, "overrides.demo_echo.name: must be 1 to 128"},
			{"ops", map[string]any{"servers": []string{"demo"}, "tool": []string{"demo_echo"}}, `unknown field \"tool\"`},
			{"ops", map[string]any{"servers": "demo"}, "servers: cannot hold a JSON string"},
			{"ops", map[string]any{"name": "other", "servers": []string{"demo"}}, `name: \"other\" differs from the path's \"ops\"`},
			{"bad%20name", set, "name: must be 1 to 64 letters"},
		} {
			status, _, body := vsREST(t, a, vaKeyAdmin, http.MethodPut, "/api/mcp/virtual-servers/"+c.name, c.body)
			if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), c.want) {
				t.Errorf("PUT %s %v: %d %s; want 422 with %q", c.name, c.body, status, body, c.want)
			}
		}
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			if status, _, body := vsREST(t, a, vaKeyAdmin, method, "/api/mcp/virtual-servers/fixed", set); status != http.StatusConflict || !strings.Contains(string(body), "config.yaml") {
				t.Errorf("%s config.yaml's set: %d %s; want 409 naming config.yaml", method, status, body)
			}
		}
		if status, _, body := vsREST(t, a, vaKeyAdmin, http.MethodDelete, "/api/mcp/virtual-servers/nope", nil); status != http.StatusNotFound {
			t.Errorf("DELETE an unknown set: %d %s; want 404", status, body)
		}
		// Nothing half-written: every refusal above left no set.
		if status, _, body := vsREST(t, b, vaKeyAdmin, http.MethodGet, "/api/mcp/virtual-servers", nil); status != http.StatusOK || strings.Contains(string(body), `"source":"api"`) {
			t.Errorf("after refused writes: %d %s; want config.yaml's set only", status, body)
		}
	})

	t.Run("lifecycle", func(t *testing.T) {
		// Create through replica A: 201, and replica B serves it.
		status, _, body := vsREST(t, a, vaKeyAdmin, http.MethodPut, "/api/mcp/virtual-servers/ops",
			map[string]any{"servers": []string{"demo"}, "tools": []string{"demo_echo", "demo_add"},
				"overrides": map[string]any{"demo_echo": map[string]any{"name": "say"}}})
		if status != http.StatusCreated {
			t.Fatalf("create ops: %d %s", status, body)
		}
		testkit.Eventually(t, 30*time.Second, "replica B to list ops", func() bool {
			status, got := opsTools(b)
			return status == http.StatusOK && slices.Equal(got, []string{"demo_add", "say"})
		})
		for range 4 { // both toolcall replicas serve it
			if status, body := call(b, "say"); status != http.StatusOK || !strings.Contains(body, "hi") {
				t.Fatalf("say through replica B: %d %s", status, body)
			}
		}
		if status, body := call(b, "demo_whoami"); status != http.StatusForbidden || !strings.Contains(body, "not in virtual server 'ops'") {
			t.Errorf("demo_whoami through ops: %d %s; want 403", status, body)
		}
		if status, _, body := vsREST(t, b, vaKeyAdmin, http.MethodGet, "/api/mcp/virtual-servers/ops", nil); status != http.StatusOK || !strings.Contains(string(body), `"source":"api"`) {
			t.Errorf("GET ops on replica B: %d %s", status, body)
		}

		// Update narrows the set: say is outside it on every replica.
		status, _, body = vsREST(t, b, vaKeyAdmin, http.MethodPut, "/api/mcp/virtual-servers/ops",
			map[string]any{"servers": []string{"demo"}, "tools": []string{"demo_add"}})
		if status != http.StatusOK {
			t.Fatalf("update ops: %d %s", status, body)
		}
		testkit.Eventually(t, 30*time.Second, "the narrowed set on both api and toolcall replicas", func() bool {
			for _, base := range []string{a, b, a, b, a, b} {
				if status, body := call(base, "say"); status != http.StatusForbidden || !strings.Contains(body, "forbidden") {
					return false
				}
			}
			return true
		})
		if status, body := call(a, "demo_add"); status != http.StatusOK || !strings.Contains(body, "5") {
			t.Errorf("demo_add after the update: %d %s", status, body)
		}
		if _, got := opsTools(a); !slices.Equal(got, []string{"demo_add"}) {
			t.Errorf("ops lists %v after the update; want [demo_add]", got)
		}

		// Delete: the bound key can use nothing.
		if status, _, body := vsREST(t, a, vaKeyAdmin, http.MethodDelete, "/api/mcp/virtual-servers/ops", nil); status != http.StatusNoContent {
			t.Fatalf("delete ops: %d %s", status, body)
		}
		testkit.Eventually(t, 30*time.Second, "ops gone on both replicas", func() bool {
			sa, _ := opsTools(a)
			sb, _ := opsTools(b)
			return sa == http.StatusNotFound && sb == http.StatusNotFound
		})
		for _, base := range []string{a, b} {
			if status, body := call(base, "demo_add"); status == http.StatusOK {
				t.Errorf("demo_add through a deleted set: %d %s", status, body)
			}
		}

		// Every change is audited with the admin's identity.
		want := map[string]bool{"put_virtual_server/added": false, "put_virtual_server/changed": false, "delete_virtual_server/removed": false}
		testkit.Eventually(t, 30*time.Second, "audit records of the virtual server changes", func() bool {
			_, _, body := vsREST(t, b, vaKeyAdmin, http.MethodGet, "/api/mcp/audit?kind=config&user=root&limit=100", nil)
			var reply struct {
				Records []struct {
					User, Action  string
					VirtualServer string `json:"virtual_server"`
					Changes       []struct{ Op string }
				} `json:"records"`
			}
			if json.Unmarshal(body, &reply) != nil {
				return false
			}
			for _, r := range reply.Records {
				if r.User == "root" && r.VirtualServer == "ops" && len(r.Changes) == 1 {
					if _, ok := want[r.Action+"/"+r.Changes[0].Op]; ok {
						want[r.Action+"/"+r.Changes[0].Op] = true
					}
				}
			}
			return !slices.Contains(mapValues(want), false)
		})
	})
}

func mapValues(m map[string]bool) []bool {
	out := make([]bool, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
