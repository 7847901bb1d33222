package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

const oauthBlock = `"oauth": {"enabled": true, "token_url": "http://127.0.0.1:1/token", "client_id": "c", "client_secret": "s"}`

// lastCallHeaders returns the headers of the fake's last tools/call
// request: what the upstream got (a result reflecting them is redacted).
func lastCallHeaders(t *testing.T, f *httpFake) map[string]string {
	t.Helper()
	calls := f.calls("tools/call")
	if len(calls) == 0 {
		t.Fatal("the upstream got no tools/call")
	}
	return calls[len(calls)-1].Headers
}

// callHeaders returns the headers of the fake's tools/call requests.
func callHeaders(t *testing.T, f *httpFake) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, r := range f.calls("tools/call") {
		out = append(out, r.Headers)
	}
	return out
}

func TestHeaderPrecedence(t *testing.T) {
	t.Parallel()
	static := `"headers": {"authorization": "Bearer static", "X-Static": "s"}`
	userAuth := `"user_auth": {"users": {"alice": "Bearer user"}, "on_missing": "passthrough"}`
	hfc := func(onMissing string) string {
		return fmt.Sprintf(`"headers_from_context": {"headers": {"Authorization": "tenant_token", "X-Tenant": "tenant_id"}, "on_missing": %q}`, onMissing)
	}
	secrets := map[string]string{"tenant_token": "Bearer tenant", "tenant_id": "acme"}
	for _, tc := range []struct {
		name     string
		blocks   []string
		user     string
		secrets  map[string]string
		wantAuth string
		wantX    map[string]string
	}{
		{"static only", []string{static}, "alice", nil, "Bearer static", nil},
		{"oauth over static", []string{static, oauthBlock}, "alice", nil, "Bearer oauth", nil},
		{"user_auth over oauth", []string{static, oauthBlock, userAuth}, "alice", nil, "Bearer user", nil},
		{"unmapped user passes through to oauth", []string{static, oauthBlock, userAuth}, "bob", nil, "Bearer oauth", nil},
		{"headers_from_context over everything", []string{static, oauthBlock, userAuth, hfc("deny")}, "alice", secrets, "Bearer tenant", map[string]string{"X-Tenant": "acme"}},
		{"missing secrets pass through to user_auth", []string{static, oauthBlock, userAuth, hfc("passthrough")}, "alice", nil, "Bearer user", nil},
		{"one secret missing, the other sent", []string{static, hfc("passthrough")}, "alice", map[string]string{"tenant_id": "acme"}, "Bearer static", map[string]string{"X-Tenant": "acme"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newHTTPFake(t, false)
			e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, strings.Join(tc.blocks, ", "))}, ""), fakeTools("web"))
			e.tokens(t, "Bearer oauth")
			req := bus.Call{Tool: "web_echo", UserID: tc.user, Arguments: json.RawMessage(`{"message":"x"}`)}
			if tc.secrets != nil {
				req.Context = &bus.CallContext{Secrets: tc.secrets}
			}
			e.mustCall(t, req)
			hs := callHeaders(t, f)
			if len(hs) != 1 {
				t.Fatalf("tools/call requests = %d", len(hs))
			}
			h := hs[0]
			n := 0
			for k, v := range h {
				if strings.EqualFold(k, "Authorization") {
					n++
					if v != tc.wantAuth {
						t.Errorf("Authorization = %q, want %q", v, tc.wantAuth)
					}
				}
			}
			if n != 1 {
				t.Errorf("Authorization sent %d times: %v", n, h)
			}
			if h["X-Static"] != "s" {
				t.Errorf("static X-Static lost: %v", h)
			}
			for k, v := range tc.wantX {
				if h[k] != v {
					t.Errorf("%s = %q, want %q", k, h[k], v)
				}
			}
		})
	}
}

// TestCredentialRefusalsNeverReachTheUpstream: every refused credential
// fails before any request leaves mcpbus, with an error naming the key and
// the reason but never the value.
func TestCredentialRefusalsNeverReachTheUpstream(t *testing.T) {
	t.Parallel()
	hfcDeny := `"headers_from_context": {"headers": {"Authorization": "tenant_token", "X-Tenant": "tenant_id"}}`
	for _, tc := range []struct {
		name     string
		blocks   string
		user     string
		secrets  map[string]string
		token    string
		code     bus.Code
		contains []string
		secret   string
	}{
		{"missing secrets with deny", hfcDeny, "alice", nil, "", bus.CodeCredentialsMissing,
			[]string{"'web'", "tenant_id, tenant_token", "context.secrets", "passthrough"}, ""},
		{"empty secret counts as missing", hfcDeny, "alice", map[string]string{"tenant_token": "", "tenant_id": "acme"}, "", bus.CodeCredentialsMissing,
			[]string{"tenant_token"}, ""},
		{"newline in secret", hfcDeny, "alice", map[string]string{"tenant_token": "Bearer sek-ret-nl\n", "tenant_id": "acme"}, "", bus.CodeCredentialsInvalid,
			[]string{"'tenant_token'", "line break"}, "sek-ret-nl"},
		{"non-ASCII secret", hfcDeny, "alice", map[string]string{"tenant_token": "Bearer sek-rét", "tenant_id": "acme"}, "", bus.CodeCredentialsInvalid,
			[]string{"'tenant_token'", "outside ASCII"}, "sek-r"},
		{"whitespace around secret", hfcDeny, "alice", map[string]string{"tenant_token": " Bearer sek-ret-ws", "tenant_id": "acme"}, "", bus.CodeCredentialsInvalid,
			[]string{"'tenant_token'", "leading or trailing whitespace"}, "sek-ret-ws"},
		{"invalid value refused even with passthrough", `"headers_from_context": {"headers": {"X-Tenant": "tenant_id"}, "on_missing": "passthrough"}`, "alice",
			map[string]string{"tenant_id": "ac\x00me-sek"}, "", bus.CodeCredentialsInvalid, []string{"'tenant_id'"}, "me-sek"},
		{"user_auth unmapped user", `"user_auth": {"users": {"alice": "Bearer ua-sek"}}`, "bob", nil, "", bus.CodeCredentialsMissing,
			[]string{"No credential is configured for your account on MCP server 'web'"}, "ua-sek"},
		{"user_auth default user is unmapped", `"user_auth": {"users": {"default": "Bearer ua-sek"}}`, "", nil, "", bus.CodeCredentialsMissing,
			[]string{"user_auth.users"}, "ua-sek"},
		{"user_auth invalid value", `"user_auth": {"header": "X-Key", "users": {"alice": "ua-sek\r\nX-Evil: 1"}}`, "alice", nil, "", bus.CodeCredentialsInvalid,
			[]string{"'X-Key'", "line break"}, "ua-sek"},
		{"oauth token invalid", oauthBlock, "alice", nil, "Bearer oa-sek\n", bus.CodeOAuthFailed,
			[]string{"'Authorization'", "line break"}, "oa-sek"},
		{"static header invalid", `"headers": {"X-Api-Key": "st-sek "}`, "alice", nil, "", bus.CodeConfigError,
			[]string{"'X-Api-Key'", "whitespace"}, "st-sek"},
		// A header name that is not an HTTP token makes the server invalid
		// where the file is loaded (the rules every service applies), so a
		// hand-edited file never sends it either.
		{"static header name invalid", `"headers": {"X Api": "st-sek"}`, "alice", nil, "", bus.CodeNotFound,
			[]string{"MCP server 'web' is not configured"}, "st-sek"},
		{"user_auth header name invalid", `"user_auth": {"header": "X Key", "users": {"alice": "ua-sek"}}`, "alice", nil, "", bus.CodeNotFound,
			[]string{"MCP server 'web' is not configured"}, "ua-sek"},
		{"headers_from_context header name invalid", `"headers_from_context": {"headers": {"X Tenant": "tenant_id"}}`, "alice",
			map[string]string{"tenant_id": "hfc-sek"}, "", bus.CodeNotFound, []string{"MCP server 'web' is not configured"}, "hfc-sek"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newHTTPFake(t, false)
			e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, tc.blocks)}, ""), fakeTools("web"))
			if tc.token != "" {
				e.tokens(t, tc.token)
			}
			req := bus.Call{Tool: "web_echo", UserID: tc.user, Arguments: json.RawMessage(`{"message":"x"}`)}
			if tc.secrets != nil {
				req.Context = &bus.CallContext{Secrets: tc.secrets}
			}
			_, err := e.call(t, req)
			var be *bus.Error
			if !errors.As(err, &be) || be.Code != tc.code {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			for _, s := range tc.contains {
				if !strings.Contains(be.Message, s) {
					t.Errorf("message %q lacks %q", be.Message, s)
				}
			}
			if tc.secret != "" && (strings.Contains(be.Message, tc.secret) || strings.Contains(e.logs.String(), tc.secret)) {
				t.Errorf("the value leaked: message %q", be.Message)
			}
			if rs := f.all(); len(rs) != 0 {
				t.Errorf("the upstream received %d request(s): %+v", len(rs), rs)
			}
		})
	}
}

func TestHTTPSessionsAreReusedPerCredential(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			t.Parallel()
			f := newHTTPFake(t, sse)
			typ := "http"
			if sse {
				typ = "sse"
			}
			entry := fmt.Sprintf(`{"type": %q, "url": %q, "user_auth": {"users": {"alice": "Bearer a", "bob": "Bearer b"}}}`, typ, f.URL)
			e := start(t, cfgOf(map[string]string{"web": entry}, ""), fakeTools("web"))
			for _, user := range []string{"alice", "alice", "bob", "alice", "bob"} {
				e.mustCall(t, bus.Call{Tool: "web_whoami", UserID: user})
				want := map[string]string{"alice": "Bearer a", "bob": "Bearer b"}[user]
				if got := lastCallHeaders(t, f)["Authorization"]; got != want {
					t.Fatalf("%s's call carried Authorization %q, want %q", user, got, want)
				}
			}
			if n := len(f.calls("initialize")); n != 2 {
				t.Errorf("initialize requests = %d, want 2 (one session per credential)", n)
			}
			if !sse {
				sessions := map[string]string{}
				for _, r := range f.calls("tools/call") {
					user := map[string]string{"Bearer a": "alice", "Bearer b": "bob"}[r.Headers["Authorization"]]
					if prev, ok := sessions[user]; ok && prev != r.Session {
						t.Errorf("%s used sessions %s and %s", user, prev, r.Session)
					}
					sessions[user] = r.Session
				}
				if sessions["alice"] == sessions["bob"] {
					t.Errorf("alice and bob share session %q", sessions["alice"])
				}
			}
		})
	}
}

func TestForgottenSessionIsReinitializedOnce(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, "")}, ""), fakeTools("web"))
	e.mustCall(t, bus.Call{Tool: "web_echo", Arguments: json.RawMessage(`{"message":"a"}`)})
	f.forget.Store(true)
	if r := e.mustCall(t, bus.Call{Tool: "web_echo", Arguments: json.RawMessage(`{"message":"b"}`)}); text(t, r) != "b" {
		t.Fatalf("retried call = %+v", r)
	}
	if n := len(f.calls("initialize")); n != 2 {
		t.Errorf("initialize requests = %d, want 2", n)
	}
	// An upstream that keeps forgetting gets exactly one new session.
	inits := len(f.calls("initialize"))
	f.forgetAlways.Store(true)
	_, err := e.call(t, bus.Call{Tool: "web_echo", Arguments: json.RawMessage(`{"message":"c"}`)})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUpstreamError || !strings.Contains(be.Message, "'web'") {
		t.Fatalf("err = %v, want upstream_error naming the server", err)
	}
	if n := len(f.calls("initialize")) - inits; n != 1 {
		t.Errorf("initialize requests after the upstream forgot for good = %d, want 1", n)
	}
	sent := 0
	for _, r := range f.all() {
		if r.Tool == "echo" && strings.Contains(string(r.Args), `"c"`) {
			sent++
		}
	}
	if sent < 1 || sent > 2 {
		t.Errorf("the call was sent %d times to a forgetting upstream, want 1 or 2", sent)
	}
}

func TestHTTPIgnoresToolCallTimeout(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(f.URL, `"tool_call_timeout": 0.1`)}, ""), fakeTools("web"))
	// The seed: tool_call_timeout bounds stdio calls; ordinary HTTP tools
	// use the caller's deadline.
	if r := e.mustCall(t, bus.Call{Tool: "web_sleep", Arguments: json.RawMessage(`{"ms":400}`)}); text(t, r) != "slept" {
		t.Fatalf("reply = %+v", r)
	}
	_, err := e.call(t, bus.Call{Tool: "web_sleep", Arguments: json.RawMessage(`{"ms":5000}`), TimeoutMS: 300})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUpstreamTimeout || !strings.Contains(be.Message, "'web'") {
		t.Fatalf("err = %v, want upstream_timeout naming the server", err)
	}
	if !strings.Contains(e.logs.String(), "ignoring tool_call_timeout") {
		t.Error("no warning about the ignored tool_call_timeout")
	}
}
