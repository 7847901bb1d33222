package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// The SSRF attack at save time: a personal connection whose url or OAuth
// token_url is a file:// URL, a loopback, link-local or metadata address
// is refused with 400 naming the field, and nothing is stored.
func TestPersonalConnectionEgressRefusedOnSave(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{keys: testKeys(), store: st})
	// (file:// is refused by the config rules' scheme check first: 422.)
	if status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "x", "server": {"type": "http", "url": "file:///etc/passwd"}}`); status != 422 || !strings.Contains(errMessage(body), "http or https") {
		t.Errorf("file:// url: %d %v, want 422", status, body)
	}
	for _, c := range []struct{ body, field string }{
		{`{"name": "x", "server": {"type": "http", "url": "http://127.0.0.1:8080/mcp"}}`, "'url'"},
		{`{"name": "x", "server": {"type": "http", "url": "http://169.254.169.254/computeMetadata/v1/", "headers": {"Metadata-Flavor": "Google"}}}`, "'url'"},
		{`{"name": "x", "server": {"type": "sse", "url": "http://[fd00:ec2::254]/latest"}}`, "'url'"},
		{`{"name": "x", "server": {"type": "http", "url": "http://10.0.0.5/"}}`, "'url'"},
		{`{"name": "x", "server": {"type": "http", "url": "https://mcp.example/gh", "oauth": {"enabled": true, "token_url": "http://localhost:9/token",
			"client_id": "c", "client_secret": "s"}}}`, "'oauth.token_url'"},
	} {
		status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, c.body)
		msg := errMessage(body)
		if status != 400 || errCode(body) != "invalid_request" || !strings.Contains(msg, "refused by the egress policy") || !strings.Contains(msg, c.field) {
			t.Errorf("%s: %d %v, want 400 refused by the egress policy naming %s", c.body, status, body, c.field)
		}
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "alice"}); err != nil || len(rows) != 0 {
		t.Fatalf("a refused connection was stored: %v %v", rows, err)
	}
}
