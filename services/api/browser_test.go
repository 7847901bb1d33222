package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

const personalPath = "/api/mcp/personal-connections"

// A web page open in the developer's browser while `make run` is up (no
// API keys): a text/plain cross-site POST through a rebinding DNS name.
func TestCrossSitePostRefusedWithoutKeys(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{store: st})
	port := e.base[strings.LastIndex(e.base, ":")+1:]
	def := `{"name": "pwn", "server": {"type": "http", "url": "https://mcp.example/x"}}`
	attacks := []struct {
		name   string
		hdr    map[string]string
		status int
		code   string
		msg    string
	}{
		{"the reproduced attack", map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": "evil.example:" + port}, 403, "forbidden", "Host header"},
		{"text/plain from loopback", map[string]string{"Content-Type": "text/plain"}, 415, "invalid_request", "Content-Type: application/json"},
		{"form post", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "invalid_request", "Content-Type: application/json"},
		{"no content type", map[string]string{}, 415, "invalid_request", "Content-Type: application/json"},
		{"rebinding Host with JSON", map[string]string{"Content-Type": "application/json", "Host": "evil.example:" + port}, 403, "forbidden", "DNS rebinding"},
		{"evil Origin with JSON", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403, "forbidden", "cross-site"},
		{"another loopback port", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403, "forbidden", "cross-site"},
		{"null Origin", map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403, "forbidden", "cross-site"},
		{"https origin for an http API", map[string]string{"Content-Type": "application/json", "Origin": "https://127.0.0.1:" + port}, 403, "forbidden", "cross-site"},
	}
	for _, a := range attacks {
		status, body := e.rawWith(t, "POST", personalPath, a.hdr, def)
		if status != a.status || errCode(body) != a.code || !strings.Contains(errMessage(body), a.msg) {
			t.Errorf("%s: %d %v, want %d %s %q", a.name, status, body, a.status, a.code, a.msg)
		}
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "default"}); err != nil || len(rows) != 0 {
		t.Fatalf("a refused request stored a connection: %v %v", rows, err)
	}
	// Reads through a rebinding name are refused too (the page would read
	// the answers once the name points at 127.0.0.1).
	for _, path := range []string{"/api/mcp/config", "/api/mcp/tools", "/healthz", "/metrics", "/api/nope"} {
		if status, body := e.rawWith(t, "GET", path, map[string]string{"Host": "evil.example:" + port}, ""); status != 403 || errCode(body) != "forbidden" {
			t.Errorf("GET %s with a rebinding Host: %d %v", path, status, body)
		}
	}
	if status, body := e.rawWith(t, "GET", "/api/mcp/config", map[string]string{"Origin": "http://evil.example"}, ""); status != 403 {
		t.Errorf("cross-site GET: %d %v", status, body)
	}
	// A bodiless state-changing POST needs the JSON content type too.
	if status, body := e.rawWith(t, "POST", "/api/mcp/cache/reset", map[string]string{"Origin": "http://127.0.0.1:" + port}, ""); status != 415 || e.resets.Load() != 0 {
		t.Errorf("bodiless POST without Content-Type: %d %v (resets %d)", status, body, e.resets.Load())
	}

	// Legitimate callers: curl (no Origin) and the API's own origin, by IP
	// or by name, with a charset parameter.
	for i, hdr := range []map[string]string{
		{"Content-Type": "application/json"},
		{"Content-Type": "application/json; charset=utf-8", "Origin": "http://127.0.0.1:" + port},
		{"Content-Type": "application/json", "Host": "localhost:" + port, "Origin": "http://localhost:" + port},
		{"Content-Type": "application/json", "Host": "[::1]:" + port},
	} {
		status, body := e.rawWith(t, "POST", personalPath, hdr, `{"name": "ok`+string(rune('a'+i))+`", "server": {"type": "http", "url": "https://mcp.example/x"}}`)
		if status != 201 {
			t.Errorf("legitimate request %v: %d %v", hdr, status, body)
		}
	}
	if status, body := e.rawWith(t, "POST", "/api/mcp/cache/reset", map[string]string{"Content-Type": "application/json"}, ""); status != 200 || e.resets.Load() != 1 {
		t.Errorf("bodiless JSON POST: %d %v", status, body)
	}
	if status, _ := e.rawWith(t, "GET", "/api/mcp/tools", map[string]string{"Host": "localhost:" + port}, ""); status != 200 {
		t.Errorf("GET with Host localhost: %d", status)
	}
}

func TestAllowedOriginWithoutKeys(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{store: sqliteStore(t), origins: []string{"http://localhost:3000"}})
	if status, body := e.rawWith(t, "GET", "/api/mcp/tools", map[string]string{"Origin": "http://localhost:3000"}, ""); status != 200 {
		t.Fatalf("allowed origin: %d %v", status, body)
	}
	if status, _ := e.rawWith(t, "GET", "/api/mcp/tools", map[string]string{"Origin": "http://localhost:3001"}, ""); status != 403 {
		t.Fatalf("an origin not listed: %d", status)
	}
}

// With API keys, Bearer authentication is what a page cannot forge: Host
// and Origin are not checked (proxies and other host names work), the
// content type rule still holds.
func TestBrowserRulesWithKeys(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t)})
	auth := "Bearer " + aliceKey
	if status, body := e.rawWith(t, "POST", personalPath, map[string]string{"Authorization": auth, "Content-Type": "text/plain"},
		`{"name": "a", "server": {"type": "http", "url": "https://mcp.example/x"}}`); status != 415 {
		t.Fatalf("text/plain with a key: %d %v", status, body)
	}
	status, body := e.rawWith(t, "POST", personalPath, map[string]string{"Authorization": auth, "Content-Type": "application/json",
		"Host": "mcpbus.internal.example", "Origin": "https://ui.example"}, `{"name": "a", "server": {"type": "http", "url": "https://mcp.example/x"}}`)
	if status != 201 {
		t.Fatalf("another Host and Origin with a key: %d %v", status, body)
	}
	// Without the key the page gets nothing.
	if status, _ := e.rawWith(t, "POST", personalPath, map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, `{}`); status != 401 {
		t.Fatalf("no key: %d", status)
	}
}

// Slowloris: headers, then part of a body, then nothing. The server must
// cut the connection once api.read_timeout_seconds passes.
func TestUnfinishedBodyIsCutOff(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{store: st, readTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(e.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST " + personalPath + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n"
	if _, err := io.WriteString(conn, head+`{"name": "slow", "server": {"type": "http", `); err != nil {
		t.Fatal(err)
	}
	// Generous: only a server that never closes gets here.
	if err := conn.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(bufio.NewReader(conn))
	if err != nil {
		t.Fatalf("the server kept the connection of an unfinished body open: %v (read %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 408") {
		t.Fatalf("reply before close = %q", got)
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "default"}); err != nil || len(rows) != 0 {
		t.Fatalf("stored: %v %v", rows, err)
	}
}

func TestPersonalConnectionCap(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{keys: testKeys(), store: st, maxPersonal: 2})
	post := func(key, name, url string) (int, map[string]any) {
		return e.do(t, "POST", personalPath, key, `{"name": "`+name+`", "server": {"type": "http", "url": "`+url+`"}}`)
	}
	for _, n := range []string{"a", "b"} {
		if status, body := post(aliceKey, n, "https://mcp.example/"+n); status != 201 {
			t.Fatalf("create %s: %d %v", n, status, body)
		}
	}
	status, body := post(aliceKey, "c", "https://mcp.example/c")
	if status != 409 || errCode(body) != "invalid_request" || !strings.Contains(errMessage(body), "personal_connections.max_per_user (2)") {
		t.Fatalf("third connection: %d %v", status, body)
	}
	// Replacing one by name is not a new one.
	if status, body := post(aliceKey, "a", "https://mcp.example/a2"); status != 200 {
		t.Fatalf("replace at the cap: %d %v", status, body)
	}
	// The cap is per user.
	if status, body := post(bobKey, "c", "https://mcp.example/c"); status != 201 {
		t.Fatalf("bob: %d %v", status, body)
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "alice"}); err != nil || len(rows) != 2 {
		t.Fatalf("alice has %d connections (%v), want 2", len(rows), err)
	}
	// After a delete there is room again.
	if status, _ := e.do(t, "DELETE", personalPath+"/b", aliceKey, ""); status != 200 {
		t.Fatal("delete")
	}
	if status, body := post(aliceKey, "c", "https://mcp.example/c"); status != 201 {
		t.Fatalf("after delete: %d %v", status, body)
	}
}

// The request headers are capped (api.max_header_bytes, 64 KiB by default;
// net/http alone allows 1 MiB).
func TestOversizedHeadersRefused(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	req, err := http.NewRequest("GET", e.base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 200<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("200 KiB of headers: %d, want 431", resp.StatusCode)
	}
	if status, _ := e.rawWith(t, "GET", "/healthz", map[string]string{"X-Small": strings.Repeat("a", 16<<10)}, ""); status != 200 {
		t.Fatalf("16 KiB of headers: %d", status)
	}
}

// ReadTimeout bounds reading the request, not the answer: a tool call that
// takes longer than it still gets its reply (there is no write timeout).
func TestSlowCallOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{readTimeout: 200 * time.Millisecond, callDelay: time.Second})
	status, body := e.do(t, "POST", "/api/mcp/tools/demo_echo/call", "", `{"arguments":{"message":"hi"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "default") {
		t.Fatalf("slow call: %d %v", status, body)
	}
}
