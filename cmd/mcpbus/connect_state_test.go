package main_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestAPerUserServerWaitsForAUser: before anyone connects an account, a
// per-user OAuth server is not a failing server. GET /api/mcp/servers
// shows it as needs_auth (not failed), and the catalog's failed_servers
// entry carries code auth_required, which the console's Overview counts
// as "waiting for a user to connect" rather than "failing discovery".
// Once Bob connects, the server is discovered at once (the tokens service
// asks discovery to rediscover it; no retry delay), and it shows as ok.
func TestAPerUserServerWaitsForAUser(t *testing.T) {
	t.Parallel()
	st := startConnectStack(t)

	// refresh=false: the state as discovery holds it, no lookup run for
	// the asking.
	ghState := func() (string, string) {
		_, body := st.rest(t, "GET", "/api/mcp/servers?refresh=false", rootKey, "")
		list, _ := body["servers"].([]any)
		for _, s := range list {
			m, _ := s.(map[string]any)
			if m["name"] == "gh" {
				return fmt.Sprint(m["state"]), fmt.Sprint(m["last_error"])
			}
		}
		return "", ""
	}
	testkit.Eventually(t, 60*time.Second, "gh discovered once (and waiting)", func() bool {
		s, _ := ghState()
		return s != "pending" && s != ""
	})
	if s, why := ghState(); s != "needs_auth" || !strings.Contains(why, "connected") {
		t.Fatalf("gh before anyone connects: state %q, last_error %q; want needs_auth", s, why)
	}
	_, body := st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
	failed, _ := body["failed_servers"].([]any)
	var gh map[string]any
	for _, f := range failed {
		if m, _ := f.(map[string]any); m["server"] == "gh" {
			gh = m
		}
	}
	if gh == nil || gh["code"] != "auth_required" {
		t.Fatalf("gh in alice's failed_servers before anyone connects: %v (all: %v)", gh, failed)
	}

	bobConnects(t, st)
	testkit.Eventually(t, 60*time.Second, "gh ok after bob connects", func() bool {
		s, _ := ghState()
		return s == "ok"
	})
	_, body = st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
	if !slices.Contains(toolNames(body), "gh_whoami") {
		t.Fatalf("gh's tools after bob connected: %v", toolNames(body))
	}
}

// TestToolsShowTheCallersAccountState: with Bob connected and Alice not,
// each sees their own state on gh's tools: Alice's carry connection
// needs_auth in REST and _meta["mcpbus/connection"] = {"state":
// "needs_auth"} on /mcp; Bob's carry none. Once Alice connects, hers lose
// it (the tokens service's change event reaches discovery).
func TestToolsShowTheCallersAccountState(t *testing.T) {
	t.Parallel()
	st := startConnectStack(t)
	bobConnects(t, st)

	restStates := func(key string) map[string]string {
		_, body := st.rest(t, "GET", "/api/mcp/tools", key, "")
		out := map[string]string{}
		tools, _ := body["tools"].([]any)
		for _, x := range tools {
			m, _ := x.(map[string]any)
			if m["server"] == "gh" {
				out[fmt.Sprint(m["name"])], _ = m["connection"].(string)
			}
		}
		return out
	}
	testkit.Eventually(t, 60*time.Second, "gh's tools listed, needs_auth for alice", func() bool {
		s := restStates(aliceKey)
		return len(s) > 0 && s["gh_whoami"] == "needs_auth"
	})
	for name, state := range restStates(aliceKey) {
		if state != "needs_auth" {
			t.Errorf("alice's %s over REST: connection %q, want needs_auth", name, state)
		}
	}
	for name, state := range restStates(bobKey) {
		if state != "" {
			t.Errorf("bob's %s over REST: connection %q, want none (connected)", name, state)
		}
	}

	mcpStates := func(key string) map[string]any {
		sid := st.mcp(t, key, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`).sessionID
		st.mcp(t, key, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		r := st.mcp(t, key, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		var reply struct {
			Result struct {
				Tools []struct {
					Name string                     `json:"name"`
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.body, &reply); err != nil {
			t.Fatalf("tools/list: %v: %s", err, r.body)
		}
		out := map[string]any{}
		for _, tl := range reply.Result.Tools {
			if strings.HasPrefix(tl.Name, "gh_") {
				var c any
				_ = json.Unmarshal(tl.Meta["mcpbus/connection"], &c)
				out[tl.Name] = c
			}
		}
		return out
	}
	alice, bob := mcpStates(aliceKey), mcpStates(bobKey)
	if len(alice) == 0 || len(bob) != len(alice) {
		t.Fatalf("gh's tools on /mcp: alice %v, bob %v", alice, bob)
	}
	for name, c := range alice {
		if m, _ := c.(map[string]any); m["state"] != "needs_auth" {
			t.Errorf("alice's %s on /mcp: _meta[mcpbus/connection] = %v, want {state: needs_auth}", name, c)
		}
	}
	for name, c := range bob {
		if c != nil {
			t.Errorf("bob's %s on /mcp: _meta[mcpbus/connection] = %v, want none", name, c)
		}
	}

	link, _ := st.connection(t, aliceKey)["authorize_url"].(string)
	if status, page := callback(t, testkit.OIDCLogin(t, link, "alice")); status != 200 {
		t.Fatalf("alice's callback: %d %s", status, page)
	}
	testkit.Eventually(t, 30*time.Second, "alice's state gone once she connected", func() bool {
		s := restStates(aliceKey)
		return len(s) > 0 && s["gh_whoami"] == ""
	})
	for name, c := range mcpStates(aliceKey) {
		if c != nil {
			t.Errorf("alice's %s on /mcp after connecting: %v, want none", name, c)
		}
	}
}
