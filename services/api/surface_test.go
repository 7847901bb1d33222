package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/api"
)

func TestConfigAndPersonalAuth(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t), configDoc: secretConfig})
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/mcp/config", ""},
		{"PUT", "/api/mcp/config", `{"mcp_servers": {}}`},
		{"PATCH", "/api/mcp/config", `{"server_name": "files", "enabled": false}`},
	} {
		if status, body := e.do(t, r.method, r.path, "", r.body); status != 401 || errCode(body) != "unauthorized" {
			t.Errorf("%s %s without a key: %d %v", r.method, r.path, status, body)
		}
		if status, body := e.do(t, r.method, r.path, "not-a-key", r.body); status != 401 || errCode(body) != "unauthorized" {
			t.Errorf("%s %s with a wrong key: %d %v", r.method, r.path, status, body)
		}
		if status, body := e.do(t, r.method, r.path, aliceKey, r.body); status != 403 || errCode(body) != "forbidden" {
			t.Errorf("%s %s as a user: %d %v", r.method, r.path, status, body)
		}
	}
	if status, body := e.do(t, "GET", "/api/mcp/config", adminKey, ""); status != 200 || at(body, "mcp_servers", "files", "env", "API_KEY") != "***" {
		t.Fatalf("admin GET: %d %v", status, body)
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/mcp/personal-connections"}, {"POST", "/api/mcp/personal-connections"},
		{"GET", "/api/mcp/personal-connections/x"}, {"DELETE", "/api/mcp/personal-connections/x"},
	} {
		if status, body := e.do(t, r.method, r.path, "", ""); status != 401 || errCode(body) != "unauthorized" {
			t.Errorf("%s %s without a key: %d %v", r.method, r.path, status, body)
		}
	}
	assertNoSecrets(t, e)
}

// TestErrorShape: every failure is {"error": {code, message}} with the
// status of DESIGN §4, including echo's own 404, 405 and 413.
func TestErrorShape(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t)})
	for _, c := range []struct {
		method, path, key, body string
		status                  int
		code                    string
	}{
		{"GET", "/nope", "", "", 404, "not_found"},
		{"GET", "/api/nope", adminKey, "", 404, "not_found"},
		{"GET", "/api/nope", "", "", 401, "unauthorized"},
		{"DELETE", "/healthz", "", "", 405, "invalid_request"},
		{"PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"x": {"description": "` + strings.Repeat("a", 70<<10) + `"}}}`, 413, "invalid_request"},
		{"POST", "/api/mcp/personal-connections", aliceKey, `{"name": "n", "server": {"description": "` + strings.Repeat("a", 70<<10) + `"}}`, 413, "invalid_request"},
		{"PATCH", "/api/mcp/config", adminKey, `{"server_name": "nope", "enabled": true}`, 404, "not_found"},
		{"GET", "/api/mcp/personal-connections/nope", aliceKey, "", 404, "not_found"},
	} {
		status, raw := e.raw(t, c.method, c.path, c.key, c.body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("%s %s: not JSON: %s", c.method, c.path, raw)
			continue
		}
		if status != c.status || errCode(body) != c.code || errMessage(body) == "" || len(body) != 1 {
			t.Errorf("%s %s: %d %v, want %d %s", c.method, c.path, status, body, c.status, c.code)
		}
	}
}

// TestOpenAPICoversEveryRoute: every route the router serves is in
// /api/openapi.json, and the document is OpenAPI 3.1.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	svc, err := api.New(api.Config{Listen: "127.0.0.1:0", ExtensionsPath: "unused.json"}, api.Deps{NC: b.NC, Names: b.Names, KV: b.KV})
	if err != nil {
		t.Fatal(err)
	}
	router, ok := svc.Handler().(*echo.Echo)
	if !ok {
		t.Fatalf("Handler is a %T", svc.Handler())
	}
	e := start(t, nil)
	status, doc := e.do(t, "GET", "/api/openapi.json", "", "")
	if status != 200 || doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %d %v", status, doc["openapi"])
	}
	paths, _ := doc["paths"].(map[string]any)
	param := regexp.MustCompile(`:([A-Za-z_]+)`)
	seen := 0
	for _, r := range router.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		seen++
		p := param.ReplaceAllString(r.Path, "{$1}")
		ops, _ := paths[p].(map[string]any)
		op, ok := ops[strings.ToLower(r.Method)].(map[string]any)
		if !ok {
			t.Errorf("route %s %s is not in /api/openapi.json", r.Method, p)
			continue
		}
		if _, ok := op["responses"].(map[string]any); !ok {
			t.Errorf("route %s %s has no responses", r.Method, p)
		}
	}
	if seen < 14 {
		t.Fatalf("only %d routes registered", seen)
	}
	// Every $ref resolves.
	raw, _ := json.Marshal(doc)
	schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, m := range regexp.MustCompile(`"#/components/schemas/([A-Za-z]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if _, ok := schemas[m[1]]; !ok {
			t.Errorf("dangling $ref %s", m[1])
		}
	}
}

// With API keys set, anyone who reaches the port could read /metrics (who
// calls which server how often) and the OpenAPI document: both now take a
// key, an admin one for /metrics and any valid one for the document.
func TestMetricsAndOpenAPINeedAKey(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys()})
	for _, c := range []struct {
		path, key string
		status    int
	}{
		{"/metrics", "", 401},
		{"/metrics", "not-a-key", 401},
		{"/metrics", aliceKey, 403},
		{"/metrics", adminKey, 200},
		{"/api/openapi.json", "", 401},
		{"/api/openapi.json", "not-a-key", 401},
		{"/api/openapi.json", aliceKey, 200},
	} {
		req, _ := http.NewRequest("GET", e.base+c.path, nil)
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("GET %s with key %q: %d %s, want %d", c.path, c.key, resp.StatusCode, raw, c.status)
		}
		if c.status != 200 && (strings.Contains(string(raw), "mcpbus_api") || strings.Contains(string(raw), "openapi")) {
			t.Errorf("GET %s with key %q leaked the body: %s", c.path, c.key, raw)
		}
	}
}

// A call past a cap on calls in flight is 429 with Retry-After and the
// rate_limited code, naming the limit.
func TestRateLimitedIs429WithRetryAfter(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys()})
	req, _ := http.NewRequest("POST", e.base+"/api/mcp/tools/demo_flooded/call", strings.NewReader(`{"args": {}}`))
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(raw), `"rate_limited"`) || !strings.Contains(string(raw), "max_calls_in_flight_per_user") {
		t.Fatalf("%d Retry-After %q %s, want 429 with Retry-After and rate_limited naming the limit", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys()})
	e.do(t, "GET", "/api/mcp/config", adminKey, "")
	e.do(t, "GET", "/api/mcp/config", adminKey, "")
	e.do(t, "GET", "/api/mcp/config", aliceKey, "")
	e.do(t, "GET", "/api/mcp/tools/x-unknown-123", adminKey, "")
	req, _ := http.NewRequest("GET", e.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, want := range []string{
		`mcpbus_api_requests_total{method="GET",route="/api/mcp/config",status="200"} 2`,
		`mcpbus_api_requests_total{method="GET",route="/api/mcp/config",status="403"} 1`,
		`mcpbus_api_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`mcpbus_api_request_duration_seconds_count{method="GET",route="/api/mcp/config"} 3`,
		`mcpbus_api_request_duration_seconds_bucket{method="GET",route="/api/mcp/config",le="+Inf"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(text, "x-unknown-123") {
		t.Error("an unknown path became a label value")
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestNoSecretsInBodiesOrLogs drives every route that touches a secret,
// successes and failures, and greps every response body and the captured
// log (debug level) for the secret values: none may appear.
func TestNoSecretsInBodiesOrLogs(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t), configDoc: secretConfig})
	const requestSecret = "rsek-context-secret-9z8y"
	const metadataSecret = "rsek-metadata-token-7x6w"
	_, masked := e.raw(t, "GET", "/api/mcp/config", adminKey, "")
	e.do(t, "PUT", "/api/mcp/config", adminKey, string(masked))
	e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"files": {"command": "npx", "env": {"API_KEY": "***", "NEW_SECRET": "***"}}}}`)
	e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"x": {"command": "bash", "env": {"K": "sek-env-7f3a"}}}}`)
	e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"x": {"type": "bogus", "headers": {"Authorization": "sek-header-91bc"}}}}`)
	e.do(t, "PATCH", "/api/mcp/config", adminKey, `{"server_name": "remote", "enabled": false}`)
	e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "p", "server": {"type": "http", "url": "http://u", "headers": {"Authorization": "psek-alice-header-11aa"}}}`)
	e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "p", "server": {"type": "ftp", "url": "http://u", "headers": {"Authorization": "psek-alice-env-22bb"}}}`)
	e.do(t, "GET", "/api/mcp/personal-connections", aliceKey, "")
	e.do(t, "GET", "/api/mcp/personal-connections/p", aliceKey, "")
	e.do(t, "DELETE", "/api/mcp/personal-connections/p", aliceKey, "")
	e.do(t, "POST", "/api/mcp/tools/demo_echo/call", aliceKey, `{"arguments": {}, "context": {"secrets": {"tok": "`+requestSecret+`"}}}`)
	e.do(t, "POST", "/api/mcp/tools/demo_echo/call", aliceKey, `{"metadata": {"auth_token": "`+metadataSecret+`"}}`)
	e.do(t, "GET", "/api/mcp/tools", "Bearer-"+adminKey, "")
	assertNoSecrets(t, e, append(personalSecrets, requestSecret, metadataSecret, adminKey, aliceKey)...)
	if !strings.Contains(e.log.String(), "request served") {
		t.Fatal("the log capture saw nothing")
	}
}
