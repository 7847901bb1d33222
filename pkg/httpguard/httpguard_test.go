package httpguard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/httpguard"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	loop := httpguard.Guard{Loopback: true, AllowedOrigins: []string{"http://localhost:3000/"}}
	keyed := httpguard.Guard{}
	for _, c := range []struct {
		name         string
		g            httpguard.Guard
		method, host string
		hdr          map[string]string
		want         int // 0 = allowed
	}{
		{"plain GET", loop, "GET", "127.0.0.1:8001", nil, 0},
		{"loopback range", loop, "GET", "127.5.6.7:8001", nil, 0},
		{"localhost any case", loop, "GET", "LocalHost:1", nil, 0},
		{"ipv6 loopback", loop, "GET", "[::1]:8001", nil, 0},
		{"no port", loop, "GET", "localhost", nil, 0},
		{"rebinding name", loop, "GET", "evil.example:8001", nil, 403},
		{"localhost suffix", loop, "GET", "localhost.evil.example:8001", nil, 403},
		{"private address", loop, "GET", "10.0.0.1:8001", nil, 403},
		{"empty host", loop, "GET", "", nil, 403},
		{"same origin", loop, "POST", "127.0.0.1:8001", map[string]string{"Origin": "http://127.0.0.1:8001", "Content-Type": "application/json"}, 0},
		{"default port origin", loop, "GET", "localhost:80", map[string]string{"Origin": "http://localhost"}, 0},
		{"allowed origin", loop, "GET", "127.0.0.1:8001", map[string]string{"Origin": "http://LOCALHOST:3000"}, 0},
		{"other port", loop, "GET", "127.0.0.1:8001", map[string]string{"Origin": "http://127.0.0.1:8002"}, 403},
		{"name vs ip", loop, "GET", "127.0.0.1:8001", map[string]string{"Origin": "http://localhost:8001"}, 403},
		{"origin with path", loop, "GET", "127.0.0.1:8001", map[string]string{"Origin": "http://127.0.0.1:8001/x"}, 403},
		{"null origin", loop, "GET", "127.0.0.1:8001", map[string]string{"Origin": "null"}, 403},
		{"json post", keyed, "POST", "any.example", map[string]string{"Content-Type": "application/json; charset=utf-8"}, 0},
		{"text post", keyed, "POST", "any.example", map[string]string{"Content-Type": "text/plain"}, 415},
		{"json suffix type", keyed, "PUT", "any.example", map[string]string{"Content-Type": "application/merge-patch+json"}, 415},
		{"bodiless patch", keyed, "PATCH", "any.example", nil, 415},
		{"delete without type", keyed, "DELETE", "any.example", nil, 0},
		{"keyed evil origin", keyed, "GET", "any.example", map[string]string{"Origin": "https://evil.example"}, 0},
	} {
		r := httptest.NewRequest(c.method, "http://x/api", nil)
		r.Host = c.host
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		got := 0
		if ref := c.g.Check(r); ref != nil {
			got = ref.Status
		}
		if got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
}

func TestHandlerWritesTheErrorShape(t *testing.T) {
	t.Parallel()
	reached := false
	h := httpguard.Guard{Loopback: true}.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	r := httptest.NewRequest("POST", "http://x/mcp", strings.NewReader(`{}`))
	r.Host = "evil.example:8001"
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var body bus.ErrorReply
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 403 || body.Error.Code != bus.CodeForbidden || reached {
		t.Fatalf("%d %s (reached %v, %v)", w.Code, w.Body, reached, err)
	}
	if strings.Contains(w.Body.String(), "evil.example") {
		t.Fatalf("the refusal echoes the Host value: %s", w.Body)
	}
}
