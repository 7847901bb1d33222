package toolcall_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The reflected-secret attack: an upstream whose tools echo what they were
// sent (whoami's request headers and environment, an error text quoting
// the request) hands a plain user the deployment's credentials. Every
// known secret is masked in the result: the static header, the OAuth
// access token, the user_auth credential, the caller's headers_from_context
// secret, a stdio server's env value; in structuredContent and in an
// isError text alike. Short values and everything else are left alone.
func TestReflectedSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	const (
		staticSecret = "st-REFLECT-5e6f77"
		userSecret   = "ua-REFLECT-3c4d55"
		ctxSecret    = "ctx-REFLECT-1a2b33"
		oauthToken   = "oa-REFLECT-7g8h99"
		envSecret    = "env-REFLECT-9i0j11"
	)
	f := newHTTPFake(t, false)
	web := httpServerJSON(f.URL, fmt.Sprintf(`"headers": {"X-Api-Key": %q, "X-Short": "abc"}, "user_auth": {"header": "X-User-Key", "users": {"alice": %q}}, "headers_from_context": {"headers": {"X-Tenant-Token": "tenant_token"}}, %s`,
		staticSecret, userSecret, oauthBlock))
	local, _ := stdioServer(t, fmt.Sprintf(`"env": {"TOOLCALL_FAKE": "stdio", "FAKE_MARK": %q}`, envSecret))
	e := startWith(t, options{cfg: cfgOf(map[string]string{"web": web, "local": local}, ""), catalog: append(fakeTools("web"), fakeTools("local")...)})
	e.tokens(t, "Bearer "+oauthToken)
	ctx := &bus.CallContext{Secrets: map[string]string{"tenant_token": ctxSecret}}

	r := e.mustCall(t, bus.Call{Tool: "web_whoami", UserID: "alice", Context: ctx})
	h := who(t, r).Headers
	if h["X-Short"] != "abc" {
		t.Errorf("a short header value was redacted: %v", h)
	}
	for _, name := range []string{"X-Api-Key", "X-User-Key", "X-Tenant-Token", "Authorization"} {
		if v := h[name]; !strings.Contains(v, "***") {
			t.Errorf("header %s reflected as %q, want it masked", name, v)
		}
	}
	fail := e.mustCall(t, bus.Call{Tool: "web_fail", UserID: "alice", Context: ctx,
		Arguments: json.RawMessage(fmt.Sprintf(`{"message": "upstream said: key %s, token Bearer %s"}`, staticSecret, oauthToken))})
	if !fail.IsError || text(t, fail) != "upstream said: key ***, token ***" {
		t.Errorf("isError text = %q (isError %v), want the secrets masked", text(t, fail), fail.IsError)
	}
	stdio := e.mustCall(t, bus.Call{Tool: "local_whoami", UserID: "alice", ThreadID: "t-redact"})
	if v := who(t, stdio).Env["FAKE_MARK"]; v != "***" {
		t.Errorf("the stdio server's env value reflected as %q, want ***", v)
	}
	for _, reply := range []bus.ToolsCallReply{r, fail, stdio} {
		b, _ := json.Marshal(reply)
		for _, s := range []string{staticSecret, userSecret, ctxSecret, oauthToken, envSecret} {
			if strings.Contains(string(b), s) {
				t.Errorf("a reply carries %s: %s", s, b)
			}
		}
	}
	// The upstream did get the credentials: only the result is redacted.
	if got := f.calls("tools/call")[0].Headers; got["X-Api-Key"] != staticSecret || got["X-Tenant-Token"] != ctxSecret {
		t.Fatalf("the upstream did not get the credentials: %v", got)
	}
}
