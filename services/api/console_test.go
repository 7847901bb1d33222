package api_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/services/api"
)

// signIn exchanges key for a console session on base: the cookie and the
// CSRF token.
func signIn(t *testing.T, e *env, base, key string) (*http.Cookie, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/console/session", strings.NewReader(fmt.Sprintf(`{"api_key": %q}`, key)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("sign-in: %d %v %v", resp.StatusCode, body, resp.Cookies())
	}
	csrf, _ := body["csrf_token"].(string)
	return resp.Cookies()[0], csrf
}

// withCookie sends a request authenticated by a console session cookie
// (no Authorization header), with the extra headers.
func withCookie(t *testing.T, e *env, base, method, path string, cookie *http.Cookie, hdr map[string]string, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.AddCookie(cookie)
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	status, raw := e.send(t, req)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return status, out
}

// The console signs in by exchanging an API key for a session cookie. The
// cookie is HttpOnly, SameSite=Strict and expiring; only its SHA-256 is
// stored; it authenticates the same REST routes with the same
// authorization as the key; every change also needs the CSRF token; any
// replica accepts it; signing out ends it everywhere.
func TestConsoleSessionCookieAndCSRF(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t), audit: true})

	if status, body := e.do(t, "POST", "/api/console/session", "", `{"api_key": "not-a-key"}`); status != 401 || !strings.Contains(errMessage(body), "not valid") {
		t.Fatalf("sign-in with a wrong key: %d %v", status, body)
	}
	if status, body := e.do(t, "POST", "/api/console/session", "", `{}`); status != 400 || !strings.Contains(errMessage(body), "api_key") {
		t.Fatalf("sign-in without a key: %d %v", status, body)
	}
	cookie, csrf := signIn(t, e, e.base, aliceKey)
	if cookie.Name != "mcpbus_console" || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.MaxAge <= 0 || cookie.Secure || csrf == "" {
		t.Fatalf("cookie %+v csrf %q", cookie, csrf)
	}
	// Only the cookie's SHA-256 is a key of the shared bucket; neither the
	// cookie nor the API key is stored.
	js, _ := jetstream.New(e.bus.NC)
	kv, err := js.KeyValue(context.Background(), e.bus.Names.ConsoleSessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	all, _ := kv.Keys(context.Background())
	var keys []string // besides the counter of failed sign-ins ("w.…")
	for _, k := range all {
		if !strings.HasPrefix(k, "w.") {
			keys = append(keys, k)
		}
	}
	if len(keys) != 1 || keys[0] == cookie.Value {
		t.Fatalf("bucket keys %v", keys)
	}
	entry, _ := kv.Get(context.Background(), keys[0])
	if strings.Contains(string(entry.Value()), cookie.Value) || strings.Contains(string(entry.Value()), aliceKey) {
		t.Fatalf("the bucket holds a secret: %s", entry.Value())
	}

	// Reads: the same handlers and authorization as alice's key.
	if status, body := withCookie(t, e, e.base, "GET", "/api/console/session", cookie, nil, ""); status != 200 || body["user_id"] != "alice" || body["csrf_token"] != csrf {
		t.Fatalf("session: %d %v", status, body)
	}
	if status, body := withCookie(t, e, e.base, "GET", "/api/mcp/personal-connections", cookie, nil, ""); status != 200 {
		t.Fatalf("personal connections with the cookie: %d %v", status, body)
	}
	for _, path := range []string{"/api/mcp/config", "/api/mcp/servers", "/api/mcp/audit", "/api/mcp/audit/stream"} {
		if status, body := withCookie(t, e, e.base, "GET", path, cookie, nil, ""); status != 403 || errCode(body) != "forbidden" {
			t.Errorf("a user's cookie on admin route %s: %d %v", path, status, body)
		}
	}

	// Changes: refused without the CSRF token, with another token, and
	// from another site even with the token.
	def := `{"name": "mine", "server": {"type": "http", "url": "https://mcp.example/x"}}`
	for _, a := range []struct {
		name string
		hdr  map[string]string
	}{
		{"no token", nil},
		{"wrong token", map[string]string{"X-CSRF-Token": csrf + "x"}},
		{"evil Origin", map[string]string{"X-CSRF-Token": csrf, "Origin": "https://evil.example"}},
		{"cross-site fetch", map[string]string{"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}},
	} {
		if status, body := withCookie(t, e, e.base, "POST", "/api/mcp/personal-connections", cookie, a.hdr, def); status != 403 || !strings.Contains(errMessage(body), "X-CSRF-Token") {
			t.Errorf("%s: %d %v", a.name, status, body)
		}
	}
	if status, body := e.do(t, "GET", "/api/mcp/personal-connections", aliceKey, ""); status != 200 || len(body["connections"].([]any)) != 0 {
		t.Fatalf("a refused change was stored: %d %v", status, body)
	}
	if status, body := withCookie(t, e, e.base, "POST", "/api/mcp/personal-connections", cookie, map[string]string{"X-CSRF-Token": csrf, "Origin": e.base, "Sec-Fetch-Site": "same-origin"}, def); status != 201 {
		t.Fatalf("a change with the token: %d %v", status, body)
	}
	// The cookie is also the identity on the MCP endpoint, and a change
	// there needs the token too.
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	mcpHdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list", "Accept": "application/json, text/event-stream"}
	if status, body := withCookie(t, e, e.base, "POST", "/mcp", cookie, mcpHdr, call); status != 403 {
		t.Fatalf("/mcp with the cookie and no token: %d %v", status, body)
	}
	mcpHdr["X-CSRF-Token"] = csrf
	if status, body := withCookie(t, e, e.base, "POST", "/mcp", cookie, mcpHdr, call); status != 200 || body["result"] == nil {
		t.Fatalf("/mcp with the cookie and the token: %d %v", status, body)
	}

	// Another replica accepts the session (the bucket is shared).
	other := e.addReplica(t)
	if status, body := withCookie(t, e, other, "GET", "/api/console/session", cookie, nil, ""); status != 200 || body["user_id"] != "alice" {
		t.Fatalf("another replica: %d %v", status, body)
	}
	// A forged cookie is nobody.
	forged := &http.Cookie{Name: cookie.Name, Value: strings.Repeat("A", len(cookie.Value))}
	if status, body := withCookie(t, e, e.base, "GET", "/api/mcp/personal-connections", forged, nil, ""); status != 401 {
		t.Fatalf("forged cookie: %d %v", status, body)
	}

	// Sign-out needs the token, then ends the session on every replica.
	if status, _ := withCookie(t, e, e.base, "DELETE", "/api/console/session", cookie, nil, ""); status != 403 {
		t.Fatalf("sign-out without the token: %d", status)
	}
	if status, _ := withCookie(t, e, e.base, "DELETE", "/api/console/session", cookie, map[string]string{"X-CSRF-Token": csrf}, ""); status != 204 {
		t.Fatalf("sign-out: %d", status)
	}
	for _, base := range []string{e.base, other} {
		if status, body := withCookie(t, e, base, "GET", "/api/console/session", cookie, nil, ""); status != 401 || !strings.Contains(errMessage(body), "sign in again") {
			t.Fatalf("after sign-out on %s: %d %v", base, status, body)
		}
	}
	// Sign-in, the change and sign-out are audited as alice.
	status, body := e.do(t, "GET", "/api/mcp/audit?user=alice", adminKey, "")
	raw, _ := json.Marshal(body)
	for _, want := range []string{"console_sign_in", "console_sign_out", "mine"} {
		if status != 200 || !strings.Contains(string(raw), want) {
			t.Errorf("audit lacks %q: %d %s", want, status, raw)
		}
	}
}

// Key-less mode (loopback only) needs no sign-in: the console is the
// admin default, and no cookie is set.
func TestConsoleKeylessSession(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	status, raw := e.raw(t, "POST", "/api/console/session", "", `{"api_key": "anything"}`)
	if status != 200 || !strings.Contains(string(raw), `"keyless":true`) || !strings.Contains(string(raw), `"user_id":"default"`) {
		t.Fatalf("key-less sign-in: %d %s", status, raw)
	}
}

// The console's page and assets: a strict CSP with no inline script and
// no framing, every page path answering index.html, no path escaping the
// embedded assets.
func TestConsoleAssetsAndCSP(t *testing.T) {
	t.Parallel()
	e := start(t, testKeys())
	for _, path := range []string{"/ui/", "/ui/servers", "/ui/tasks"} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = fmt.Fprint(&b, "")
		buf := make([]byte, 1<<16)
		n, _ := resp.Body.Read(buf)
		resp.Body.Close()
		body := string(buf[:n])
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != 200 || !strings.Contains(body, `<script type="module" src="/ui/app.js">`) {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
		if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(body) || strings.Contains(body, " on") && regexp.MustCompile(`\son[a-z]+=`).MatchString(body) {
			t.Fatalf("%s has inline script", path)
		}
	}
	for path, want := range map[string]int{"/ui/app.js": 200, "/ui/style.css": 200, "/ui/nope.js": 404, "/ui/../go.mod": 404, "/ui/%2e%2e/console.go": 404} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(e.base + "/ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "javascript") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("app.js headers: %v", resp.Header)
	}
}

// GET /api/mcp/tools with search, offset or limit answers one page of the
// matching tools and their total, so the console never loads a whole
// catalog.
func TestToolsSearchAndPaging(t *testing.T) {
	t.Parallel()
	tools := make([]bus.Tool, 0, 1200)
	for i := range 1200 {
		tools = append(tools, bus.Tool{Name: fmt.Sprintf("srv_tool%04d", i), Server: "srv", Description: map[bool]string{true: "reads weather", false: "other"}[i%100 == 7]})
	}
	e := startWith(t, options{tools: tools})
	status, body := e.do(t, "GET", "/api/mcp/tools?search=WEATHER&limit=5&offset=10", "", "")
	if status != 200 || body["total"] != float64(12) || len(body["tools"].([]any)) != 2 {
		t.Fatalf("search page: %d total %v, %d tools", status, body["total"], len(body["tools"].([]any)))
	}
	if first := body["tools"].([]any)[0].(map[string]any)["name"]; first != "srv_tool1007" {
		t.Fatalf("first of the page: %v", first)
	}
	status, body = e.do(t, "GET", "/api/mcp/tools?limit=50", "", "")
	if status != 200 || body["total"] != float64(1200) || len(body["tools"].([]any)) != 50 {
		t.Fatalf("first page: %d %v", status, body["total"])
	}
	if status, body := e.do(t, "GET", "/api/mcp/tools?limit=501", "", ""); status != 400 || !strings.Contains(errMessage(body), "limit") {
		t.Fatalf("limit too large: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", "/api/mcp/tools", "", ""); status != 200 || len(body["tools"].([]any)) != 1200 || body["total"] != nil {
		t.Fatalf("unpaged reply changed: %d %v", status, body["total"])
	}
}

// A session past its expiry, or made from a key no longer configured, is
// nobody, whatever the bucket still holds; under TLS the cookie is Secure.
func TestConsoleSessionExpiryRevocationAndTLS(t *testing.T) {
	t.Parallel()
	e := start(t, testKeys())
	js, _ := jetstream.New(e.bus.NC)
	kv, err := js.KeyValue(context.Background(), e.bus.Names.ConsoleSessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	plant := func(cookie, keySum, expires string) *http.Cookie {
		sum := sha256.Sum256([]byte(cookie))
		val := fmt.Sprintf(`{"user_id":"root","role":"admin","key_sha256":%q,"csrf":"c","expires_at":%q}`, keySum, expires)
		if _, err := kv.Put(context.Background(), hex.EncodeToString(sum[:]), []byte(val)); err != nil {
			t.Fatal(err)
		}
		return &http.Cookie{Name: "mcpbus_console", Value: cookie}
	}
	live := plant("live-cookie", keySum(adminKey), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if status, body := withCookie(t, e, e.base, "GET", "/api/mcp/config", live, nil, ""); status != 200 {
		t.Fatalf("a live session: %d %v", status, body)
	}
	for name, c := range map[string]*http.Cookie{
		"expired":     plant("expired-cookie", keySum(adminKey), time.Now().Add(-time.Second).UTC().Format(time.RFC3339)),
		"revoked key": plant("revoked-cookie", keySum("a-key-removed-from-config"), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)),
	} {
		if status, body := withCookie(t, e, e.base, "GET", "/api/mcp/config", c, nil, ""); status != 401 || !strings.Contains(errMessage(body), "sign in again") {
			t.Errorf("%s session: %d %v", name, status, body)
		}
	}

	svc, err := api.New(api.Config{Listen: "127.0.0.1:0", Keys: testKeys()}, api.Deps{NC: e.bus.NC, Names: e.bus.Names, KV: e.bus.KV})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "https://mcpbus.example/api/console/session", strings.NewReader(fmt.Sprintf(`{"api_key": %q}`, aliceKey)))
	req.Header.Set("Content-Type", "application/json")
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != 200 || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly {
		t.Fatalf("sign-in under TLS: %d %v", rec.Code, cookies)
	}
}

// TestConsoleSignInRateLimit (attack: guessing keys): with
// sign_in_failures 3, three wrong keys from one address, spread over two
// api replicas, are refused with 401; the fourth attempt, even with a
// valid key and on either replica, is refused with 429 and a Retry-After
// that ends the window, without echoing the key; once the window has
// passed the valid key signs in again.
func TestConsoleSignInRateLimit(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	e := startWith(t, options{keys: testKeys(), signInFailures: 3, clock: clock})
	other := e.addReplica(t)
	attempt := func(base, key string) (*http.Response, map[string]any) {
		resp, err := http.Post(base+"/api/console/session", "application/json", strings.NewReader(fmt.Sprintf(`{"api_key": %q}`, key)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	for i, base := range []string{e.base, other, e.base} {
		if resp, body := attempt(base, fmt.Sprint("guess-", i)); resp.StatusCode != 401 {
			t.Fatalf("wrong key %d: %d %v", i, resp.StatusCode, body)
		}
	}
	for _, base := range []string{other, e.base} {
		for _, key := range []string{"guess-3", aliceKey} {
			resp, body := attempt(base, key)
			ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if resp.StatusCode != 429 || errCode(body) != "rate_limited" || err != nil || ra < 1 || ra > 15*60 {
				t.Fatalf("attempt after 3 failures: %d Retry-After %q %v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			if msg := errMessage(body); !strings.Contains(msg, "too many failed sign-ins") || strings.Contains(msg, key) {
				t.Fatalf("the refusal: %q", msg)
			}
			if len(resp.Cookies()) != 0 {
				t.Fatal("a refused sign-in set a cookie")
			}
		}
	}
	// The next window.
	offset.Store(int64(15 * time.Minute))
	if resp, body := attempt(other, aliceKey); resp.StatusCode != 200 || body["user_id"] != "alice" {
		t.Fatalf("sign-in after the window: %d %v", resp.StatusCode, body)
	}
}

// GET /api/mcp/resources and /api/mcp/prompts with search, offset or
// limit answer one page of the matching entries and their total, as the
// tools list: the resources then the templates are one sequence.
func TestResourcesAndPromptsSearchAndPaging(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	nc := e.bus.Connect(t)
	answer := func(subject string, reply any) {
		body, _ := json.Marshal(reply)
		if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(body) }); err != nil {
			t.Fatal(err)
		}
	}
	var res bus.ResourcesListReply
	var prompts bus.PromptsListReply
	for i := range 120 {
		word := map[bool]string{true: "Weather report", false: "other"}[i%10 == 3]
		res.Resources = append(res.Resources, bus.Resource{Server: "srv", MCPResource: bus.MCPResource{
			URI: fmt.Sprintf("mcpbus://srv/doc://%03d", i), Name: fmt.Sprintf("doc%03d", i), Description: word}})
		prompts.Prompts = append(prompts.Prompts, bus.Prompt{Server: "srv", MCPPrompt: bus.MCPPrompt{Name: fmt.Sprintf("srv_p%03d", i), Description: word}})
	}
	tpl := bus.ResourceTemplatesListReply{ResourceTemplates: []bus.ResourceTemplate{
		{Server: "srv", MCPResourceTemplate: bus.MCPResourceTemplate{URITemplate: "mcpbus://srv/weather://{city}", Name: "city"}},
		{Server: "srv", MCPResourceTemplate: bus.MCPResourceTemplate{URITemplate: "mcpbus://srv/notes://{id}", Name: "note"}}}}
	answer(e.bus.Names.ResourcesList(), res)
	answer(e.bus.Names.ResourceTemplatesList(), tpl)
	answer(e.bus.Names.PromptsList(), prompts)
	nc.Flush()

	names := func(body map[string]any, key, field string) []string {
		var out []string
		for _, it := range body[key].([]any) {
			out = append(out, it.(map[string]any)[field].(string))
		}
		return out
	}
	// 12 resources and one template match "weather"; the page from 10
	// holds the last two resources and the template.
	status, body := e.do(t, "GET", "/api/mcp/resources?search=WEATHER&offset=10&limit=5", "", "")
	if status != 200 || body["total"] != float64(13) || body["offset"] != float64(10) {
		t.Fatalf("resources search: %d %v", status, body)
	}
	if got := names(body, "resources", "name"); !slices.Equal(got, []string{"doc103", "doc113"}) {
		t.Fatalf("resources of the page: %v", got)
	}
	if got := names(body, "resource_templates", "name"); !slices.Equal(got, []string{"city"}) {
		t.Fatalf("templates of the page: %v", got)
	}
	status, body = e.do(t, "GET", "/api/mcp/resources?limit=5", "", "")
	if status != 200 || body["total"] != float64(122) || len(body["resources"].([]any)) != 5 || len(body["resource_templates"].([]any)) != 0 {
		t.Fatalf("first page of resources: %d %v", status, body["total"])
	}
	status, body = e.do(t, "GET", "/api/mcp/resources?search=note", "", "")
	if status != 200 || body["total"] != float64(1) || len(body["resources"].([]any)) != 0 || !slices.Equal(names(body, "resource_templates", "uriTemplate"), []string{"mcpbus://srv/notes://{id}"}) {
		t.Fatalf("a template found by its URI: %d %v", status, body)
	}
	status, body = e.do(t, "GET", "/api/mcp/prompts?search=weather&limit=3&offset=1", "", "")
	if status != 200 || body["total"] != float64(12) || !slices.Equal(names(body, "prompts", "name"), []string{"srv_p013", "srv_p023", "srv_p033"}) {
		t.Fatalf("prompts search: %d %v", status, body)
	}
	status, body = e.do(t, "GET", "/api/mcp/prompts?search=nothing-matches", "", "")
	if list, ok := body["prompts"].([]any); status != 200 || !ok || len(list) != 0 || body["total"] != float64(0) {
		t.Fatalf("no match is an empty list, not null: %d %v", status, body)
	}
	for _, path := range []string{"/api/mcp/resources?limit=0", "/api/mcp/prompts?offset=-1"} {
		if status, body := e.do(t, "GET", path, "", ""); status != 400 || !regexp.MustCompile(`limit|offset`).MatchString(errMessage(body)) {
			t.Fatalf("%s: %d %v", path, status, body)
		}
	}
	if status, body := e.do(t, "GET", "/api/mcp/prompts", "", ""); status != 200 || len(body["prompts"].([]any)) != 120 || body["total"] != nil {
		t.Fatalf("unpaged prompts changed: %d %v", status, body["total"])
	}
	if status, body := e.do(t, "GET", "/api/mcp/resources", "", ""); status != 200 || len(body["resources"].([]any)) != 120 || body["total"] != nil {
		t.Fatalf("unpaged resources changed: %d %v", status, body["total"])
	}
}
