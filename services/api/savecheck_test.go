package api_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Values that only failed on use were stored (201): CRLF in a header
// value (400), a header name that is no HTTP token or a file:// URL (422:
// the config rules every service applies to a server definition).
func TestSaveRefusesUnsendableValues(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{keys: testKeys(), store: st})
	for _, c := range []struct {
		server, field, secret string
		status                int
	}{
		{`{"type": "http", "url": "https://mcp.example/x", "headers": {"X-Foo": "sek-crlf-1\r\nX-Injected: yes"}}`, "headers.X-Foo", "sek-crlf-1", 400},
		{`{"type": "http", "url": "https://mcp.example/x", "headers": {"Authorization: Bearer sek-name-2": "v"}}`, "headers", "sek-name-2", 422},
		{`{"type": "http", "url": "https://mcp.example/x", "headers": {"X-Foo": "sek-trail-3 "}}`, "headers.X-Foo", "sek-trail-3", 400},
		{`{"type": "http", "url": "file:///etc/sek-file-4"}`, "url", "sek-file-4", 422},
		{`{"type": "sse", "url": "gopher://mcp.example/sek-gopher-5"}`, "url", "sek-gopher-5", 422},
		{`{"type": "http", "url": "https://mcp.example/x", "headers_from_context": {"headers": {"X Bad": "k"}}}`, "headers_from_context.headers", "", 422},
		{`{"type": "http", "url": "https://mcp.example/x", "oauth": {"token_url": "file:///sek-token-6", "client_id": "c", "client_secret": "s"}}`, "oauth.token_url", "sek-token-6", 422},
	} {
		status, body := e.do(t, "POST", personalPath, aliceKey, `{"name": "x", "server": `+c.server+`}`)
		d, _ := at(body, "error", "details").(map[string]any)
		if status != c.status || errCode(body) != "invalid_request" || d["field"] != c.field || d["server"] != "x" || !strings.Contains(errMessage(body), c.field) {
			t.Errorf("%s: %d %v, want %d naming %s", c.server, status, body, c.status, c.field)
		}
		if c.secret != "" && strings.Contains(e.allBodies(), c.secret) {
			t.Errorf("%s: the response echoes the value", c.server)
		}
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "alice"}); err != nil || len(rows) != 0 {
		t.Fatalf("a refused connection was stored: %v %v", rows, err)
	}

	// The deployment config: PUT and PATCH (enable) refuse the same values.
	before, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	status, body := e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"x": {"type": "http", "url": "https://a.example/", "headers": {"X-Foo": "sek-crlf-1\r\n"}}}}`)
	if d, _ := at(body, "error", "details").(map[string]any); status != 400 || d["field"] != "headers.X-Foo" || d["server"] != "x" {
		t.Fatalf("PUT with a CRLF header: %d %v", status, body)
	}
	status, body = e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"x": {"type": "http", "url": "file:///etc/passwd"}}}`)
	if d, _ := at(body, "error", "details").(map[string]any); status != 422 || d["field"] != "url" || strings.Contains(errMessage(body), "passwd") {
		t.Fatalf("PUT with a file URL: %d %v", status, body)
	}
	if after, _ := os.ReadFile(e.cfg); string(after) != string(before) {
		t.Fatalf("a refused PUT changed the file:\n%s", after)
	}
	// "$VAR" values are judged where they are expanded, not at save.
	if status, body := e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"x": {"type": "http", "url": "$REMOTE_URL", "headers": {"X-Foo": "$FOO"}}}}`); status != 200 {
		t.Fatalf("PUT with placeholders: %d %v", status, body)
	}
	// A hand-edited file: enabling its bad server is refused.
	if err := os.WriteFile(e.cfg, []byte(`{"mcpServers": {"y": {"type": "http", "url": "file:///x", "enabled": false}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	status, body = e.do(t, "PATCH", "/api/mcp/config", adminKey, `{"server_name": "y", "enabled": true}`)
	if d, _ := at(body, "error", "details").(map[string]any); status != 422 || d["field"] != "url" {
		t.Fatalf("PATCH enabling a file URL: %d %v", status, body)
	}
}

// URL userinfo and query strings are secrets: masked in every view, kept
// on a "***" write, sealed at rest.
func TestURLSecretsMaskedAndKept(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	e := startWith(t, options{keys: testKeys(), store: st})
	const real = "https://svc:sek-url-pw-1@mcp.example/mcp?api_key=sek-url-q-2"
	def := `{"type": "http", "url": "` + real + `"}`
	status, body := e.do(t, "POST", personalPath, aliceKey, `{"name": "gh", "server": `+def+`}`)
	const masked = "https://***@mcp.example/mcp?***"
	if status != 201 || at(body, "server", "url") != masked {
		t.Fatalf("create: %d %v", status, body)
	}
	rt := body["runtime_name"]
	if status, body := e.do(t, "GET", personalPath+"/gh", aliceKey, ""); status != 200 || at(body, "server", "url") != masked {
		t.Fatalf("get: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", personalPath, aliceKey, ""); status != 200 || at(body["connections"].([]any)[0], "server", "url") != masked {
		t.Fatalf("list: %d %v", status, body)
	}
	// Writing the masked view back keeps the URL (same runtime name).
	if status, body := e.do(t, "POST", personalPath, aliceKey, `{"name": "gh", "server": {"type": "http", "url": "`+masked+`"}}`); status != 200 || body["runtime_name"] != rt {
		t.Fatalf("masked write: %d %v", status, body)
	}
	// Moving the masked credentials to another host is refused.
	if status, body := e.do(t, "POST", personalPath, aliceKey, `{"name": "gh", "server": {"type": "http", "url": "https://***@evil.example/mcp?***"}}`); status != 400 {
		t.Fatalf("masked credentials to another host: %d %v", status, body)
	}
	reply, err := bus.Request[bus.PersonalServersReply](context.Background(), e.bus.NC, e.bus.Names.InternalPersonal(), bus.PersonalServersRequest{UserID: "alice"})
	if err != nil || len(reply.Servers) != 1 {
		t.Fatalf("internal personal: %+v %v", reply, err)
	}
	var got map[string]any
	_ = json.Unmarshal(reply.Servers[0].Definition, &got)
	if got["url"] != real {
		t.Fatalf("the runtime URL is %v, want the stored one", got["url"])
	}
	row, err := st.Connections().GetConnection(context.Background(), store.ConnectionParams{UserID: "alice", Name: "gh"})
	if err != nil || strings.Contains(string(row.Definition), "sek-url") || strings.Contains(string(row.Definition), "mcp.example") {
		t.Fatalf("the stored definition is not sealed: %s %v", row.Definition, err)
	}

	// The deployment config.
	status, body = e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": {"remote": {"type": "http", "url": "https://mcp.example/mcp?token=sek-url-q-3",
		"oauth": {"token_url": "https://auth.example/t?key=sek-url-q-4", "client_id": "c", "client_secret": "s"}}}}`)
	if status != 200 || at(servers(t, body), "remote", "url") != "https://mcp.example/mcp?***" || at(servers(t, body), "remote", "oauth", "token_url") != "https://auth.example/t?***" {
		t.Fatalf("PUT: %d %v", status, body)
	}
	_, raw := e.raw(t, "GET", "/api/mcp/config", adminKey, "")
	var view map[string]any
	_ = json.Unmarshal(raw, &view)
	if status, body := e.do(t, "PUT", "/api/mcp/config", adminKey, `{"mcp_servers": `+mustJSON(t, servers(t, view))+`}`); status != 200 {
		t.Fatalf("PUT the masked view back: %d %v", status, body)
	}
	file := decodeFile(t, e.cfg)
	if at(file, "mcpServers", "remote", "url") != "https://mcp.example/mcp?token=sek-url-q-3" || at(file, "mcpServers", "remote", "oauth", "token_url") != "https://auth.example/t?key=sek-url-q-4" {
		t.Fatalf("\"***\" did not keep the stored URLs: %v", file)
	}
	assertNoSecrets(t, e, "sek-url-pw-1", "sek-url-q-2", "sek-url-q-3", "sek-url-q-4")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Without a credentials key, a token in url or args would sit in plain
// text: refused like any other secret-carrying definition.
func TestURLTokenWithoutKeyRefused(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	// Personal stdio on, with launch specs these command lines match.
	personal := config.PersonalConnections{Stdio: true, Path: config.DefaultPersonalPath, LaunchSpecs: []config.LaunchSpec{
		{Name: "remote", Command: "npx", Args: []string{"-y", "mcp-remote", "{url}"}, UserArgs: map[string]config.UserArg{"url": {Pattern: `https://\S+`}}},
		{Name: "github", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-github", "{args}"},
			UserArgs: map[string]config.UserArg{"args": {Values: []string{"--token", "sek-nokey-5", "--api-key=sek-nokey-6"}, Max: 2}}},
	}}
	e := startWith(t, options{keys: testKeys(), store: st, noSealer: true, personal: personal})
	for _, server := range []string{
		`{"type": "http", "url": "https://mcp.example/mcp?token=sek-nokey-1"}`,
		`{"type": "http", "url": "https://svc:sek-nokey-2@mcp.example/mcp"}`,
		`{"type": "http", "url": "https://mcp.example/", "oauth": {"enabled": false, "token_url": "https://auth.example/t?k=sek-nokey-3"}}`,
		`{"command": "npx", "args": ["-y", "mcp-remote", "https://mcp.example/sse?key=sek-nokey-4"]}`,
		`{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github", "--token", "sek-nokey-5"]}`,
		`{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github", "--api-key=sek-nokey-6"]}`,
	} {
		status, body := e.do(t, "POST", personalPath, aliceKey, `{"name": "x", "server": `+server+`}`)
		if status != 503 || errCode(body) != "config_error" || !strings.Contains(errMessage(body), "MCPBUS_CREDENTIALS_KEY") {
			t.Errorf("%s: %d %v", server, status, body)
		}
	}
	if rows, err := st.Connections().ListConnections(context.Background(), store.ListConnectionsParams{UserID: "alice"}); err != nil || len(rows) != 0 {
		t.Fatalf("stored without a key: %v %v", rows, err)
	}
	if status, body := e.do(t, "POST", personalPath, aliceKey, `{"name": "plain", "server": {"type": "http", "url": "https://mcp.example/mcp"}}`); status != 201 {
		t.Fatalf("a URL without secrets: %d %v", status, body)
	}
	assertNoSecrets(t, e, "sek-nokey-1", "sek-nokey-2", "sek-nokey-3", "sek-nokey-4", "sek-nokey-5", "sek-nokey-6")
}
