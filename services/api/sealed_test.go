package api_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestPersonalSecretsNeedTheCredentialsKey(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t), noSealer: true})
	status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey,
		`{"name": "gh", "server": {"type": "http", "url": "https://mcp.example/gh", "headers": {"Authorization": "Bearer nokey-secret-77"}}}`)
	if status != 503 || errCode(body) != "config_error" || !strings.Contains(errMessage(body), "MCPBUS_CREDENTIALS_KEY") {
		t.Fatalf("a secret without a key: %d %v", status, body)
	}
	if strings.Contains(e.allBodies()+e.log.String(), "nokey-secret-77") {
		t.Fatal("the refused secret was echoed or logged")
	}
	// Without secret values the definition is stored as it is.
	status, body = e.do(t, "POST", "/api/mcp/personal-connections", aliceKey,
		`{"name": "open", "server": {"type": "http", "url": "https://mcp.example/open"}}`)
	if status != 201 {
		t.Fatalf("a definition without secrets: %d %v", status, body)
	}
	status, body = e.do(t, "GET", "/api/mcp/personal-connections/open", aliceKey, "")
	if status != 200 || !strings.Contains(fmt.Sprint(body), "mcp.example/open") {
		t.Fatalf("read back: %d %v", status, body)
	}
}
