package toolcall_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// TestSecretsNeverLeak runs the credential paths, successful and failing,
// and greps everything the service logged (debug level, transports
// included), everything it returned, every message on the bus and what the
// upstream saw on the error paths, for the secret values. None may appear.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const (
		ctxSecret    = "ctx-SEKRET-1a2b"
		userSecret   = "ua-SEKRET-3c4d"
		staticSecret = "st-SEKRET-5e6f"
		oauthSecret  = "oa-SEKRET-7g8h"
		metaSecret   = "md-SEKRET-9i0j"
	)
	f := newHTTPFake(t, false)
	web := httpServerJSON(f.URL, fmt.Sprintf(`"headers": {"X-Api-Key": %q}, "user_auth": {"header": "X-User-Key", "users": {"alice": %q, "carol": "bad\nua-SEKRET-3c4d"}}, "headers_from_context": {"headers": {"X-Tenant-Token": "tenant_token"}}`, staticSecret, userSecret))
	bad := newHTTPFake(t, false)
	oauthWeb := httpServerJSON(bad.URL, oauthBlock)
	g := config.Guardrails{Enabled: true, FailClosed: true, Provider: config.GuardrailProvider{Use: "nats:acme.guard"}}
	e := startWith(t, options{
		cfg:        cfgOf(map[string]string{"web": web, "oa": oauthWeb}, `"mcpInterceptors": ["request_logger", "nats:acme.icpt"]`),
		catalog:    append(fakeTools("web"), fakeTools("oa")...),
		guardrails: g,
	})
	e.tokens(t, "Bearer "+oauthSecret+"\n")

	// Every message on the bus, except the callers' own requests (which
	// carry the secrets by design) and the tokens service's replies.
	var (
		mu      sync.Mutex
		traffic []string
	)
	spy := e.bus.Connect(t)
	if _, err := spy.Subscribe(">", func(m *nats.Msg) {
		if m.Subject == e.bus.Names.ToolsCall() || strings.Contains(string(m.Data), `"expires_at"`) || strings.HasPrefix(m.Subject, "$KV.") {
			return
		}
		mu.Lock()
		traffic = append(traffic, m.Subject+" "+string(m.Data)+fmt.Sprint(m.Header))
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	_ = spy.Flush()
	natsInterceptor(t, e, "acme.icpt", func(req bus.InterceptRequest) (bus.InterceptReply, bool) {
		if strings.Contains(string(req.Arguments), "interceptor-deny") {
			return bus.InterceptReply{Error: &bus.InterceptError{Message: "denied by interceptor"}}, true
		}
		return bus.InterceptReply{}, true
	})
	guard := e.bus.Connect(t)
	if _, err := guard.Subscribe("acme.guard", func(m *nats.Msg) {
		allow := !strings.Contains(string(m.Data), "guard-deny")
		body, _ := json.Marshal(bus.GuardrailDecision{Allow: allow, Reasons: []bus.GuardrailReason{{Code: "acme", Message: "no"}}})
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	_ = guard.Flush()

	secrets := func(tok string) *bus.CallContext {
		return &bus.CallContext{Secrets: map[string]string{"tenant_token": tok, "unused": ctxSecret}}
	}
	var returned []string
	do := func(req bus.Call, wantErr bool) {
		t.Helper()
		r, err := e.call(t, req)
		if (err != nil) != wantErr {
			t.Fatalf("%s %s: err = %v, want error %v", req.Tool, req.Arguments, err, wantErr)
		}
		if err != nil {
			returned = append(returned, err.Error())
		}
		b, _ := json.Marshal(r)
		returned = append(returned, string(b))
	}
	args := func(s string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"message":%q}`, s)) }

	// The success path (the upstream legitimately receives the credentials).
	do(bus.Call{Tool: "web_echo", UserID: "alice", Arguments: args("ok"), Context: secrets(ctxSecret)}, false)
	if h := f.calls("tools/call")[0].Headers; h["X-Tenant-Token"] != ctxSecret || h["X-User-Key"] != userSecret || h["X-Api-Key"] != staticSecret {
		t.Fatalf("the credentials did not reach the upstream: %v", h)
	}
	do(bus.Call{Tool: "web_fail", UserID: "alice", Arguments: args("tool error"), Context: secrets(ctxSecret)}, false)
	// Error paths.
	seenBefore := len(f.all())
	do(bus.Call{Tool: "web_echo", UserID: "alice", Context: secrets(ctxSecret + "\n")}, true)  // invalid secret
	do(bus.Call{Tool: "web_echo", UserID: "alice", Context: secrets("tök" + ctxSecret)}, true) // non-ASCII secret
	do(bus.Call{Tool: "web_echo", UserID: "alice", Context: &bus.CallContext{}}, true)         // missing secret
	do(bus.Call{Tool: "web_echo", UserID: "carol", Context: secrets(ctxSecret)}, true)         // invalid user_auth value
	do(bus.Call{Tool: "web_echo", UserID: "dave", Context: secrets(ctxSecret)}, true)          // unmapped user
	do(bus.Call{Tool: "web_echo", UserID: "alice", Arguments: args("guard-deny"), Context: secrets(ctxSecret)}, true)
	do(bus.Call{Tool: "web_echo", UserID: "alice", Arguments: args("interceptor-deny"), Context: secrets(ctxSecret)}, true)
	do(bus.Call{Tool: "web_echo", UserID: "alice", Metadata: json.RawMessage(`{"auth_token":"` + metaSecret + `"}`), Context: secrets(ctxSecret)}, true)
	do(bus.Call{Tool: "oa_echo", UserID: "alice", Context: secrets(ctxSecret)}, true) // invalid OAuth token
	if n := len(f.all()) - seenBefore; n != 0 || len(bad.all()) != 0 {
		t.Fatalf("refused calls reached the upstream: %d and %d requests", n, len(bad.all()))
	}
	// An upstream that echoes the request headers in its error body.
	f.echo500.Store(true)
	do(bus.Call{Tool: "web_echo", UserID: "alice", Context: secrets(ctxSecret)}, true)
	// A timeout while carrying the credentials.
	f.echo500.Store(false)
	do(bus.Call{Tool: "web_sleep", UserID: "alice", Arguments: json.RawMessage(`{"ms":5000}`), TimeoutMS: 200, Context: secrets(ctxSecret)}, true)

	mu.Lock()
	bus := strings.Join(traffic, "\n")
	captured := len(traffic)
	mu.Unlock()
	logs := e.logs.String()
	out := strings.Join(returned, "\n")
	// The echo is cut from the error with the rest of the body (the
	// status code stays).
	if !strings.Contains(out, "status 500") {
		t.Errorf("the upstream's error status is not in the error:\n%s", out)
	}
	for _, s := range []string{ctxSecret, userSecret, staticSecret, oauthSecret, metaSecret} {
		if strings.Contains(logs, s) {
			t.Errorf("the log contains %s", s)
		}
		if strings.Contains(out, s) {
			t.Errorf("a reply contains %s", s)
		}
	}
	for _, s := range []string{ctxSecret, metaSecret} {
		if strings.Contains(bus, s) {
			t.Errorf("the bus carried %s outside the caller's request", s)
		}
	}
	if !strings.Contains(logs, `"msg":"mcp tool call"`) || captured == 0 {
		t.Fatalf("nothing was captured: %d log bytes, %d messages", len(logs), captured)
	}
}
