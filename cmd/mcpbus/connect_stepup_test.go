package main_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// authError is the error of a REST answer and its authorize_url.
func authError(body map[string]any) (code, message, link string) {
	e, _ := body["error"].(map[string]any)
	details, _ := e["details"].(map[string]any)
	link, _ = details["authorize_url"].(string)
	return fmt.Sprint(e["code"]), fmt.Sprint(e["message"]), link
}

// scopesOf is the scope parameter of an authorization link.
func scopesOf(t *testing.T, link string) []string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(u.Query().Get("scope"))
}

// TestConnectStepUp: the demo server behind oidc-provider needs scope
// mcp:write for gh_add and mcp:admin (which the authorization server
// never grants) for gh_echo, answering 403 insufficient_scope otherwise.
// Alice connects with the challenge's scope (mcp:read); her gh_add call
// answers auth_required with a link asking for mcp:read and mcp:write;
// once she has signed in again the call succeeds with the wider token.
// gh_echo keeps answering 403: after one more link mcpbus stops asking
// (two step-ups per connection, three authorizations in all) and says
// why. Every step-up is in the audit log, per user and server.
func TestConnectStepUp(t *testing.T) {
	t.Parallel()
	st := startConnectStack(t, "-auth-tool-scopes", "add=mcp:write,echo=mcp:admin")

	c := st.connection(t, aliceKey)
	link, _ := c["authorize_url"].(string)
	// Listing again reuses the flow in progress instead of starting one
	// per listing.
	if again := st.connection(t, aliceKey)["authorize_url"]; again != link {
		t.Fatalf("a second listing gave another link: %v, then %v", link, again)
	}
	if got := scopesOf(t, link); !slices.Equal(got, []string{"mcp:read"}) {
		t.Fatalf("the first authorization asks for %v, want the challenge's [mcp:read]", got)
	}
	if status, page := callback(t, testkit.OIDCLogin(t, link, "alice")); status != 200 {
		t.Fatalf("callback: %d %s", status, page)
	}
	testkit.Eventually(t, 60*time.Second, "gh_add in alice's catalog", func() bool {
		_, body := st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
		return slices.Contains(toolNames(body), "gh_add")
	})
	if sub, status, body := st.subject(t, aliceKey); sub != "alice" {
		t.Fatalf("alice's whoami with mcp:read: %q %d %v", sub, status, body)
	}

	// Step-up: the 403's scope united with the connection's.
	status, body := st.rest(t, "POST", "/api/mcp/tools/gh_add/call", aliceKey, `{"arguments":{"a":2,"b":3}}`)
	code, msg, link := authError(body)
	if status != 401 || code != "auth_required" || !strings.Contains(msg, link) || !strings.HasPrefix(link, st.issuer) {
		t.Fatalf("gh_add with mcp:read only: %d %v", status, body)
	}
	if got := scopesOf(t, link); !slices.Equal(got, []string{"mcp:read", "mcp:write"}) {
		t.Fatalf("the step-up asks for %v, want [mcp:read mcp:write]", got)
	}
	if status, page := callback(t, testkit.OIDCLogin(t, link, "alice")); status != 200 || !strings.Contains(page, "Account connected") {
		t.Fatalf("step-up callback: %d %s", status, page)
	}
	status, body = st.rest(t, "POST", "/api/mcp/tools/gh_add/call", aliceKey, `{"arguments":{"a":2,"b":3}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "5") {
		t.Fatalf("gh_add after the step-up: %d %v", status, body)
	}
	if c := st.connection(t, aliceKey); c["state"] != "connected" || !strings.Contains(fmt.Sprint(c["scopes"]), "mcp:write") {
		t.Fatalf("alice's connection after the step-up: %v", c)
	}

	// A server that keeps answering 403: one more link, then no more.
	status, body = st.rest(t, "POST", "/api/mcp/tools/gh_echo/call", aliceKey, `{"arguments":{"message":"hi"}}`)
	code, _, link = authError(body)
	if status != 401 || code != "auth_required" || !slices.Contains(scopesOf(t, link), "mcp:admin") || !slices.Contains(scopesOf(t, link), "mcp:write") {
		t.Fatalf("gh_echo, second step-up: %d %v", status, body)
	}
	if status, page := callback(t, testkit.OIDCLogin(t, link, "alice")); status != 200 {
		t.Fatalf("second step-up callback: %d %s", status, page)
	}
	for range 2 { // and it stays so
		status, body = st.rest(t, "POST", "/api/mcp/tools/gh_echo/call", aliceKey, `{"arguments":{"message":"hi"}}`)
		code, msg, link = authError(body)
		if status != 403 || code != "forbidden" || link != "" || !strings.Contains(msg, "insufficient_scope") || !strings.Contains(msg, "'gh'") {
			t.Fatalf("gh_echo after two step-ups: %d %v", status, body)
		}
	}
	// The granted tools still work.
	if status, body := st.rest(t, "POST", "/api/mcp/tools/gh_add/call", aliceKey, `{"arguments":{"a":2,"b":3}}`); status != 200 {
		t.Fatalf("gh_add after the refused step-up: %d %v", status, body)
	}

	// Audited per user and server: two requested, two completed, one
	// refused at the limit.
	testkit.Eventually(t, 30*time.Second, "the step-ups in the audit log", func() bool {
		_, body := st.rest(t, "GET", "/api/mcp/audit?kind=config&user=alice", rootKey, "")
		recs, _ := body["records"].([]any)
		outcomes := map[string]int{}
		for _, r := range recs {
			m, _ := r.(map[string]any)
			if m["action"] == "oauth_step_up" && m["server"] == "gh" && m["user"] == "alice" {
				outcomes[fmt.Sprint(m["outcome"])]++
			}
		}
		return outcomes["requested"] >= 2 && outcomes["ok"] == 2 && outcomes["limit"] >= 1
	})
}
