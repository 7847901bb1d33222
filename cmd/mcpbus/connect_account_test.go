package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// connectStack is a deployment (tokens, discovery, three toolcall
// replicas, api as processes on the machine's NATS and PostgreSQL) in
// front of the demo server guarded by oidc-provider.
type connectStack struct {
	base, issuer, demo string
	procs              []*process
	names              bus.Names
	natsURL            string
}

const (
	aliceKey = "alice-api-key-for-connect-tests"
	bobKey   = "bob-api-key-for-connect-tests"
	rootKey  = "root-api-key-for-connect-tests"
)

func keyEntry(key, user string) string { return roleKeyEntry(key, user, "user") }

func roleKeyEntry(key, user, role string) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("    - sha256: %s\n      user_id: %s\n      role: %s\n", hex.EncodeToString(sum[:]), user, role)
}

// startOAuthDemo starts oidc-provider and the demo server over HTTP
// accepting only its JWTs (for the resource), and returns the issuer and
// the demo server's base URL (its MCP endpoint is <demo>/mcp); demoArgs
// are extra flags of the demo server.
func startOAuthDemo(t *testing.T, dir string, demoArgs ...string) (issuer, demo string) {
	t.Helper()
	issuer = testkit.ServeOIDCProvider(t, 300)
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-oauth", demoBin, append([]string{"-transport", "http", "-addr", demoAddr, "-auth-issuer", issuer}, demoArgs...)...)
	return issuer, "http://" + demoAddr
}

// oauthServerEntry is the extensions_config.json entry of an MCP server
// at demo guarded by per-user OAuth (authorization_code).
func oauthServerEntry(demo string) string {
	return fmt.Sprintf(`{"type": "http", "url": %q, "oauth": {"grant_type": "authorization_code", "refresh_skew_seconds": 0}}`, demo+"/mcp")
}

// startConnectStack starts the stack; demoArgs are extra flags of the
// demo server.
func startConnectStack(t *testing.T, demoArgs ...string) *connectStack {
	t.Helper()
	st := &connectStack{natsURL: envOr("TEST_NATS_URL", "nats://127.0.0.1:4222"), names: testkit.RandomNames(t)}
	dbURL := testSchema(t)
	dir := t.TempDir()
	st.issuer, st.demo = startOAuthDemo(t, dir, demoArgs...)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	st.base = "http://" + apiAddr
	ext := `{"mcpServers": {"gh": ` + oauthServerEntry(st.demo) + `}}`
	settings := natsSettings(st.natsURL, st.names) + fmt.Sprintf("database:\n  backend: postgres\n  url: %q\napi:\n  listen: %s\n  public_url: %s\n  keys:\n%s%s",
		dbURL, apiAddr, st.base, keyEntry(aliceKey, "alice"), keyEntry(bobKey, "bob")+roleKeyEntry(rootKey, "root", "admin"))
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := crypto.NewKey()
	env := []string{"MCPBUS_CREDENTIALS_KEY=" + key}
	for _, svc := range []string{"tokens", "discovery", "toolcall", "toolcall", "toolcall", "api"} {
		st.procs = append(st.procs, startProcessEnv(t, dir, fmt.Sprintf("%s-%d", svc, len(st.procs)), env, mcpbusBin, "serve", svc))
	}
	waitHealthy(t, st.natsURL, st.names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceAPI)
	return st
}

// rest sends an authenticated request and decodes the JSON answer.
func (st *connectStack) rest(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, st.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: not JSON (%d): %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// connection is the caller's entry for gh in GET /api/mcp/connections.
func (st *connectStack) connection(t *testing.T, key string) map[string]any {
	t.Helper()
	status, body := st.rest(t, "GET", "/api/mcp/connections", key, "")
	list, _ := body["connections"].([]any)
	if status != 200 || len(list) != 1 {
		t.Fatalf("GET /api/mcp/connections: %d %v", status, body)
	}
	c, _ := list[0].(map[string]any)
	return c
}

// callback opens the URL the authorization server redirected to (the
// browser's last step) and returns the result page's status and text.
func callback(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'none'") {
		t.Errorf("result page CSP %q", csp)
	}
	if strings.Contains(strings.ToLower(string(raw)), "<script") {
		t.Errorf("result page has a script")
	}
	return resp.StatusCode, string(raw)
}

// subject calls gh_whoami as key and returns the token subject the
// upstream saw, or the error body.
func (st *connectStack) subject(t *testing.T, key string) (string, int, map[string]any) {
	t.Helper()
	status, body := st.rest(t, "POST", "/api/mcp/tools/gh_whoami/call", key, `{"arguments":{}}`)
	if status != 200 {
		return "", status, body
	}
	sc, _ := body["structured_content"].(map[string]any)
	h, _ := sc["headers"].(map[string]any)
	sub, _ := h["X-Demo-Oauth-Subject"].(string)
	return sub, status, body
}

type mcpReply struct {
	sessionID string
	body      []byte // the JSON-RPC message (from JSON or the SSE event)
}

// mcp posts one JSON-RPC message to /mcp as key in session sid.
func (st *connectStack) mcp(t *testing.T, key, sid, msg string) mcpReply {
	t.Helper()
	req, _ := http.NewRequest("POST", st.base+"/mcp", strings.NewReader(msg))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				raw = []byte(d)
			}
		}
	}
	return mcpReply{sessionID: resp.Header.Get("Mcp-Session-Id"), body: raw}
}

func asStats(t *testing.T, issuer string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(issuer + "/test/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func post(t *testing.T, u string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d", u, resp.StatusCode)
	}
}

// TestConnectYourAccountEndToEnd: two users connect their own accounts on
// an OAuth-protected MCP server (the demo server checking JWTs of
// oidc-provider) through GET /api/mcp/connections → the link → a scripted
// sign-in and consent → the callback; each call carries the caller's own
// token; expired tokens are refreshed exactly once by 50 concurrent
// callers over three toolcall replicas; disconnecting revokes; an
// invalid_grant moves the connection to needs_auth with a new link while
// the tools stay listed. Attacks: a replayed state, a forged state, a
// state completed with another user's code, a wrong issuer, a changed
// redirect_uri. No token, code or verifier reaches a log.
func TestConnectYourAccountEndToEnd(t *testing.T) {
	t.Parallel()
	st := startConnectStack(t)
	var secrets []string // what must never appear in a log

	// Alice: the listing offers a link; she signs in; the callback says so.
	c := st.connection(t, aliceKey)
	link, _ := c["authorize_url"].(string)
	if c["state"] != "needs_auth" || c["mode"] != "per_user" || !strings.HasPrefix(link, st.issuer) {
		t.Fatalf("alice before connecting: %v", c)
	}
	back := testkit.OIDCLogin(t, link, "alice")
	if !strings.HasPrefix(back, st.base+"/oauth/callback?") {
		t.Fatalf("the authorization server sent the browser to %s", back)
	}
	aliceBack := back
	bu, _ := url.Parse(back)
	secrets = append(secrets, bu.Query().Get("code"))
	if status, page := callback(t, back); status != 200 || !strings.Contains(page, "Account connected") {
		t.Fatalf("callback: %d %s", status, page)
	}
	if c := st.connection(t, aliceKey); c["state"] != "connected" || c["issuer"] != st.issuer || c["authorize_url"] != nil || c["expires_at"] == nil {
		t.Fatalf("alice after connecting: %v", c)
	}
	// Replayed: the same response again is refused, nothing changes.
	if status, page := callback(t, aliceBack); status != 400 || !strings.Contains(page, "already used") {
		t.Fatalf("replayed callback: %d %s", status, page)
	}
	// Forged: a state mcpbus never issued.
	if status, page := callback(t, st.base+"/oauth/callback?state=forged&code=x&iss="+url.QueryEscape(st.issuer)); status != 400 || !strings.Contains(page, "not started by mcpbus") {
		t.Fatalf("forged callback: %d %s", status, page)
	}

	// The catalog lists the server's tools once an account is connected.
	testkit.Eventually(t, 60*time.Second, "gh_whoami in alice's catalog", func() bool {
		_, body := st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
		return slices.Contains(toolNames(body), "gh_whoami")
	})
	if sub, status, body := st.subject(t, aliceKey); sub != "alice" {
		t.Fatalf("alice's call: %q %d %v", sub, status, body)
	}

	// Bob has not connected: his call answers auth_required with his link.
	sub, status, body := st.subject(t, bobKey)
	e, _ := body["error"].(map[string]any)
	details, _ := e["details"].(map[string]any)
	bobLink, _ := details["authorize_url"].(string)
	if sub != "" || status != 401 || e["code"] != "auth_required" || !strings.HasPrefix(bobLink, st.issuer) || !strings.Contains(fmt.Sprint(e["message"]), bobLink) {
		t.Fatalf("bob before connecting: %d %v", status, body)
	}
	back = testkit.OIDCLogin(t, bobLink, "bob")
	bu, _ = url.Parse(back)
	secrets = append(secrets, bu.Query().Get("code"))
	if status, page := callback(t, back); status != 200 {
		t.Fatalf("bob's callback: %d %s", status, page)
	}
	if sub, _, body := st.subject(t, bobKey); sub != "bob" {
		t.Fatalf("bob's call: %q %v", sub, body)
	}
	if sub, _, _ := st.subject(t, aliceKey); sub != "alice" {
		t.Fatalf("alice's call after bob connected: %q", sub)
	}

	// A state from another user: Alice's flow completed with the code Bob
	// got in his own flow is refused (the code is bound to Bob's verifier),
	// and nothing of Alice's changes.
	_, ab := st.rest(t, "POST", "/api/mcp/connections/gh/authorize", aliceKey, "")
	_, bb := st.rest(t, "POST", "/api/mcp/connections/gh/authorize", bobKey, "")
	aliceURL, _ := url.Parse(fmt.Sprint(ab["authorize_url"]))
	bobBack, _ := url.Parse(testkit.OIDCLogin(t, fmt.Sprint(bb["authorize_url"]), "bob"))
	mixed := st.base + "/oauth/callback?" + url.Values{"state": {aliceURL.Query().Get("state")}, "code": {bobBack.Query().Get("code")}, "iss": {st.issuer}}.Encode()
	if status, page := callback(t, mixed); status != 400 || !strings.Contains(page, "did not accept") {
		t.Fatalf("alice's state with bob's code: %d %s", status, page)
	}
	if sub, _, _ := st.subject(t, aliceKey); sub != "alice" {
		t.Fatalf("alice's call after the mixed callback: %q", sub)
	}
	// A wrong issuer (mix-up): refused before the code is spent.
	_, ab = st.rest(t, "POST", "/api/mcp/connections/gh/authorize", aliceKey, "")
	wrong, _ := url.Parse(testkit.OIDCLogin(t, fmt.Sprint(ab["authorize_url"]), "mallory"))
	q := wrong.Query()
	q.Set("iss", "http://127.0.0.1:1")
	wrong.RawQuery = q.Encode()
	if status, page := callback(t, wrong.String()); status != 400 || !strings.Contains(page, "another issuer") {
		t.Fatalf("wrong issuer: %d %s", status, page)
	}
	if sub, _, _ := st.subject(t, aliceKey); sub != "alice" {
		t.Fatalf("alice's call after the wrong-issuer callback: %q", sub)
	}
	// A changed redirect_uri: the authorization server sends no code there.
	_, ab = st.rest(t, "POST", "/api/mcp/connections/gh/authorize", aliceKey, "")
	evil, _ := url.Parse(fmt.Sprint(ab["authorize_url"]))
	q = evil.Query()
	q.Set("redirect_uri", "http://127.0.0.1:1/oauth/callback")
	evil.RawQuery = q.Encode()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(evil.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 400 || strings.Contains(resp.Header.Get("Location"), "127.0.0.1:1") {
		t.Fatalf("changed redirect_uri: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Expiry: the upstream now refuses every token it has seen; 50
	// concurrent calls of Alice over three toolcall replicas get one
	// refresh between them, and all succeed with her new token.
	nc, err := nats.Connect(st.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for range 6 { // sessions on every replica first
		if _, err := bus.Request[bus.ToolsCallReply](context.Background(), nc, st.names.ToolsCall(), bus.Call{Tool: "gh_whoami", UserID: "alice", ThreadID: "warm"}); err != nil {
			t.Fatal(err)
		}
	}
	before := asStats(t, st.issuer)
	post(t, st.demo+"/debug/reject-tokens-seen")
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, err := bus.Request[bus.ToolsCallReply](ctx, nc, st.names.ToolsCall(), bus.Call{Tool: "gh_whoami", UserID: "alice", ThreadID: fmt.Sprint("t", i)})
			if err == nil && !strings.Contains(string(r.StructuredContent), `"X-Demo-Oauth-Subject":"alice"`) {
				err = fmt.Errorf("call %d answered as someone else", i)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := asStats(t, st.issuer)
	if got := after["refresh_token"] - before["refresh_token"]; got != 1 {
		t.Fatalf("refreshes for 50 concurrent callers after expiry: %v, want 1", got)
	}

	// Disconnect: Bob's tokens are revoked at the server and forgotten.
	before = asStats(t, st.issuer)
	if status, body := st.rest(t, "DELETE", "/api/mcp/connections/gh", bobKey, ""); status != 200 || body["state"] != "needs_auth" {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	if after := asStats(t, st.issuer); after["revocation"]-before["revocation"] < 1 {
		t.Fatalf("no revocation on disconnect: %v → %v", before, after)
	}
	if _, status, body := st.subject(t, bobKey); status != 401 {
		t.Fatalf("bob after disconnecting: %d %v", status, body)
	}
	// The same over /mcp: a client that declared URL-mode elicitation gets
	// a URLElicitationRequiredError with the link; another client an
	// isError result whose text carries the link.
	for _, withURL := range []bool{true, false} {
		caps := `{}`
		if withURL {
			caps = `{"elicitation":{"form":{},"url":{}}}`
		}
		sid := st.mcp(t, bobKey, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`).sessionID
		st.mcp(t, bobKey, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		r := st.mcp(t, bobKey, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"gh_whoami","arguments":{}}}`)
		if withURL {
			var el struct {
				Error struct {
					Code int `json:"code"`
					Data struct {
						Elicitations []struct{ Mode, URL string } `json:"elicitations"`
					} `json:"data"`
				} `json:"error"`
			}
			_ = json.Unmarshal(r.body, &el)
			if el.Error.Code != -32042 || len(el.Error.Data.Elicitations) != 1 || el.Error.Data.Elicitations[0].Mode != "url" || !strings.HasPrefix(el.Error.Data.Elicitations[0].URL, st.issuer) {
				t.Fatalf("/mcp with URL elicitation: %s", r.body)
			}
			continue
		}
		if !strings.Contains(string(r.body), `"isError":true`) || !strings.Contains(string(r.body), st.issuer+"/auth?") {
			t.Fatalf("/mcp without URL elicitation: %s", r.body)
		}
	}

	// invalid_grant: the server forgets Alice's refresh tokens and refuses
	// her access token; her next call is auth_required with a new link,
	// the listing says needs_auth, and the tools stay listed.
	post(t, st.issuer+"/test/kill-refresh?account=alice")
	post(t, st.demo+"/debug/reject-tokens-seen")
	_, status, body = st.subject(t, aliceKey)
	e, _ = body["error"].(map[string]any)
	details, _ = e["details"].(map[string]any)
	if status != 401 || e["code"] != "auth_required" || !strings.HasPrefix(fmt.Sprint(details["authorize_url"]), st.issuer) {
		t.Fatalf("alice after invalid_grant: %d %v", status, body)
	}
	if c := st.connection(t, aliceKey); c["state"] != "needs_auth" || !strings.HasPrefix(fmt.Sprint(c["authorize_url"]), st.issuer) {
		t.Fatalf("alice's connection after invalid_grant: %v", c)
	}
	if _, body := st.rest(t, "GET", "/api/mcp/tools", aliceKey, ""); !slices.Contains(toolNames(body), "gh_whoami") {
		t.Fatalf("the tools vanished after invalid_grant: %v", toolNames(body))
	}

	// Nothing secret in any log.
	for _, p := range st.procs {
		out := p.out.String()
		for _, s := range secrets {
			if s != "" && strings.Contains(out, s) {
				t.Errorf("%s logged an authorization code", p.name)
			}
		}
		if strings.Contains(out, "eyJ") {
			t.Errorf("%s logged something that looks like a JWT", p.name)
		}
	}
}
