package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// configSecrets are the real secret values in secretConfig; no response
// body or log line may ever contain one.
var configSecrets = []string{
	"sek-env-7f3a", "sek-header-91bc", "sek-client-secret-44de", "sek-refresh-token-0a1b",
	"sek-extra-param-5c6d", "sek-user-alice-8e9f", "sek-extra-apikey-2b3c", "sek-nested-pw-6d7e",
	"sek-list-token-1f2a",
}

// secretConfig has every kind of secret the masking rules cover.
const secretConfig = `{
  "skills": {"enabled": ["writer"]},
  "mcpServers": {
    "files": {
      "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "$WORKSPACE"],
      "env": {"API_KEY": "sek-env-7f3a", "FROM_ENV": "$FILES_TOKEN"},
      "cwd": "/srv", "customFlag": true,
      "apiKey": "sek-extra-apikey-2b3c",
      "nested": {"db": {"password": "sek-nested-pw-6d7e", "host": "db"}, "list": [{"refreshToken": "sek-list-token-1f2a"}]}
    },
    "remote": {
      "type": "http", "url": "$REMOTE_URL",
      "headers": {"Authorization": "Bearer sek-header-91bc"},
      "oauth": {"token_url": "https://auth/token", "grant_type": "refresh_token", "client_id": "cid",
        "client_secret": "sek-client-secret-44de", "refresh_token": "sek-refresh-token-0a1b",
        "extra_token_params": {"resource": "sek-extra-param-5c6d"}},
      "user_auth": {"enabled": true, "header": "Authorization", "users": {"alice": "Bearer sek-user-alice-8e9f"}},
      "headers_from_context": {"enabled": true, "headers": {"X-User-Token": "user_token"}}
    }
  },
  "mcpInterceptors": ["pkg.mod:Interceptor"]
}`

func servers(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	s, ok := body["mcp_servers"].(map[string]any)
	if !ok {
		t.Fatalf("no mcp_servers in %v", body)
	}
	return s
}

func at(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func decodeFile(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("the config file is broken: %v\n%s", err, data)
	}
	return out
}

func TestGetConfigMasksEverySecret(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{configDoc: secretConfig})
	status, body := e.do(t, "GET", "/api/mcp/config", "", "")
	if status != 200 {
		t.Fatalf("GET: %d %v", status, body)
	}
	s := servers(t, body)
	for _, c := range []struct {
		path []string
		want any
	}{
		{[]string{"files", "env", "API_KEY"}, "***"},
		{[]string{"files", "env", "FROM_ENV"}, "***"},
		{[]string{"files", "args"}, []any{"-y", "@modelcontextprotocol/server-filesystem", "$WORKSPACE"}},
		{[]string{"files", "cwd"}, "/srv"},
		{[]string{"files", "customFlag"}, true},
		{[]string{"files", "apiKey"}, "***"},
		{[]string{"files", "nested", "db", "password"}, "***"},
		{[]string{"files", "nested", "db", "host"}, "db"},
		{[]string{"remote", "url"}, "$REMOTE_URL"},
		{[]string{"remote", "headers", "Authorization"}, "***"},
		{[]string{"remote", "oauth", "client_secret"}, nil},
		{[]string{"remote", "oauth", "refresh_token"}, nil},
		{[]string{"remote", "oauth", "client_id"}, "cid"},
		{[]string{"remote", "oauth", "token_url"}, "https://auth/token"},
		{[]string{"remote", "oauth", "extra_token_params", "resource"}, "***"},
		{[]string{"remote", "user_auth", "users", "alice"}, "***"},
		{[]string{"remote", "user_auth", "header"}, "Authorization"},
		{[]string{"remote", "headers_from_context", "headers", "X-User-Token"}, "user_token"},
	} {
		if got := at(s, c.path...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %#v, want %#v", strings.Join(c.path, "."), got, c.want)
		}
	}
	if got := at(s, "files", "nested", "list").([]any)[0].(map[string]any)["refreshToken"]; got != "***" {
		t.Errorf("secret in a list = %v", got)
	}
	if oauth := at(s, "remote", "oauth").(map[string]any); !hasKey(oauth, "client_secret") || !hasKey(oauth, "refresh_token") {
		t.Errorf("oauth secrets must be shown as null: %v", oauth)
	}
	assertNoSecrets(t, e)
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

// assertNoSecrets greps every response body and the log for the secrets.
func assertNoSecrets(t *testing.T, e *env, extra ...string) {
	t.Helper()
	bodies, logs := e.allBodies(), e.log.String()
	for _, s := range append(append([]string{}, configSecrets...), extra...) {
		if strings.Contains(bodies, s) {
			t.Errorf("a response body contains the secret %q", s)
		}
		if strings.Contains(logs, s) {
			t.Errorf("the log contains the secret %q", s)
		}
	}
}

func TestPutConfigRoundTripKeepsSecrets(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{configDoc: secretConfig})
	if err := os.Chmod(e.cfg, 0o640); err != nil {
		t.Fatal(err)
	}
	before := decodeFile(t, e.cfg)
	_, got := e.raw(t, "GET", "/api/mcp/config", "", "")
	status, body := e.do(t, "PUT", "/api/mcp/config", "", string(got))
	if status != 200 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	after := decodeFile(t, e.cfg)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the round trip changed the file:\nbefore %v\nafter  %v", before, after)
	}
	if info, _ := os.Stat(e.cfg); info.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", info.Mode().Perm())
	}
	var first map[string]any
	_ = json.Unmarshal(got, &first)
	if !reflect.DeepEqual(body, first) {
		t.Fatalf("PUT answered %v, want the masked config %v", body, first)
	}
	if e.resets.Load() != 1 {
		t.Fatalf("cache resets = %d, want 1", e.resets.Load())
	}

	// An edit through the masked view: one secret replaced, one restored, a
	// server removed, top-level keys kept; published to the KV bucket.
	edit := `{"mcp_servers": {"remote": {"type": "http", "url": "$REMOTE_URL", "headers": {"Authorization": "***", "X-Extra": "new-value"},
		"oauth": {"token_url": "https://auth/token", "grant_type": "refresh_token", "client_id": "cid", "client_secret": null, "refresh_token": "sek-new-refresh-3c4d"}}}}`
	status, body = e.do(t, "PUT", "/api/mcp/config", "", edit)
	if status != 200 || at(body, "mcp_servers", "remote", "headers", "X-Extra") != "***" || at(body, "mcp_servers", "files") != nil {
		t.Fatalf("PUT edit: %d %v", status, body)
	}
	file := decodeFile(t, e.cfg)
	for path, want := range map[string]any{
		"mcpServers.remote.headers.Authorization": "Bearer sek-header-91bc",
		"mcpServers.remote.headers.X-Extra":       "new-value",
		"mcpServers.remote.oauth.client_secret":   "sek-client-secret-44de",
		"mcpServers.remote.oauth.refresh_token":   "sek-new-refresh-3c4d",
		"mcpServers.remote.url":                   "$REMOTE_URL",
		"mcpInterceptors":                         []any{"pkg.mod:Interceptor"},
		"skills.enabled":                          []any{"writer"},
	} {
		if got := at(file, strings.Split(path, ".")...); !reflect.DeepEqual(got, want) {
			t.Errorf("file %s = %v, want %v", path, got, want)
		}
	}
	if at(file, "mcpServers", "files") != nil || at(file, "mcpServers", "remote", "user_auth") != nil {
		t.Errorf("left-out server or block kept: %v", file)
	}
	testkit.Eventually(t, 10*time.Second, "the new config in the KV bucket", func() bool {
		entry, err := e.bus.KV.Get(context.Background(), bus.KVKeyConfig)
		if err != nil {
			return false
		}
		var rec sharedstate.ConfigRecord
		return json.Unmarshal(entry.Value(), &rec) == nil && bytes.Contains(rec.Raw, []byte("sek-new-refresh-3c4d"))
	})
	if e.resets.Load() != 2 {
		t.Fatalf("cache resets = %d, want 2", e.resets.Load())
	}
	assertNoSecrets(t, e, "sek-new-refresh-3c4d")
}

func TestPutConfigRefusals(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{configDoc: secretConfig})
	original, _ := os.ReadFile(e.cfg)
	for _, c := range []struct {
		name, body string
		status     int
		msg        string
		details    map[string]any
	}{
		{"masked new env key", `{"mcp_servers": {"files": {"command": "npx", "env": {"OTHER": "***"}}}}`, 400,
			"Cannot set env key 'OTHER' to masked value '***'; provide a real value.", map[string]any{"server": "files", "field": "env.OTHER"}},
		{"masked new header", `{"mcp_servers": {"remote": {"type": "http", "url": "http://u", "headers": {"X-New": "***"}}}}`, 400,
			"Cannot set header 'X-New' to masked value '***'; provide a real value.", nil},
		{"masked new extra", `{"mcp_servers": {"files": {"command": "npx", "accessKey": "***"}}}`, 400,
			"Cannot set extra config key 'accessKey' to masked value '***'; provide a real value.", nil},
		{"masked placeholder in a new server", `{"mcp_servers": {"fresh": {"type": "http", "url": "http://u", "headers": {"Authorization": "***"}}}}`, 400,
			"Cannot persist masked secret placeholder for MCP server 'fresh' field 'headers.Authorization'", nil},
		{"reserved name", `{"mcp_servers": {"p_0123456789ab": {"type": "http", "url": "http://u"}}}`, 400, "reserved for personal connections", nil},
		{"schema: bad transport", `{"mcp_servers": {"w": {"type": "websocket", "url": "ws://u"}}}`, 422,
			"Invalid MCP configuration: MCP server 'w': type: unsupported transport type", map[string]any{"server": "w", "field": "type"}},
		{"schema: http without url", `{"mcp_servers": {"w": {"type": "http"}}}`, 422, "MCP server 'w': url:", nil},
		{"schema: not an object", `{"mcp_servers": []}`, 422, "mcp_servers must be a JSON object", nil},
		{"schema: missing mcp_servers", `{}`, 422, "mcp_servers is required", nil},
		{"bad JSON", `{"mcp_servers": `, 400, "not valid JSON", nil},
	} {
		status, body := e.do(t, "PUT", "/api/mcp/config", "", c.body)
		if status != c.status || errCode(body) != "invalid_request" || !strings.Contains(errMessage(body), c.msg) {
			t.Errorf("%s: %d %v, want %d with %q", c.name, status, body, c.status, c.msg)
			continue
		}
		if c.details != nil {
			got, _ := at(body, "error", "details").(map[string]any)
			for k, v := range c.details {
				if got[k] != v {
					t.Errorf("%s: details %v, want %s=%v", c.name, got, k, v)
				}
			}
		}
	}
	if now, _ := os.ReadFile(e.cfg); !bytes.Equal(now, original) {
		t.Fatalf("a refused PUT changed the file:\n%s", now)
	}
	if e.resets.Load() != 0 {
		t.Fatalf("a refused PUT reset the caches")
	}
	assertNoSecrets(t, e)
}

func TestPatchConfig(t *testing.T) {
	t.Parallel()
	doc := `{"mcpServers": {"a": {"transport": "stdio", "command": "npx", "args": ["pkg"], "env": {"K": "sek-env-7f3a"}},
		"bad": {"type": "http", "url": "ftp://files", "enabled": false}}, "other": {"x": 1}}`
	e := startWith(t, options{configDoc: doc})
	status, body := e.do(t, "PATCH", "/api/mcp/config", "", `{"server_name": "a", "enabled": false}`)
	if status != 200 || at(body, "mcp_servers", "a", "enabled") != false || at(body, "mcp_servers", "a", "env", "K") != "***" {
		t.Fatalf("disable: %d %v", status, body)
	}
	file := decodeFile(t, e.cfg)
	want := map[string]any{}
	_ = json.Unmarshal([]byte(doc), &want)
	want["mcpServers"].(map[string]any)["a"].(map[string]any)["enabled"] = false
	if !reflect.DeepEqual(file, want) {
		t.Fatalf("PATCH changed more than the flag:\n%v\nwant %v", file, want)
	}
	if e.resets.Load() != 1 {
		t.Fatalf("resets = %d", e.resets.Load())
	}

	before, _ := os.ReadFile(e.cfg)
	for _, c := range []struct {
		body   string
		status int
		code   string
		msg    string
	}{
		{`{"server_name": "nope", "enabled": true}`, 404, "not_found", "MCP server 'nope' not found"},
		{`{"server_name": "bad", "enabled": true}`, 422, "invalid_request", "MCP server 'bad': url: must use http or https, got scheme 'ftp'"},
		{`{"server_name": "", "enabled": true}`, 422, "invalid_request", "server_name is required"},
		{`{"server_name": "a"}`, 422, "invalid_request", "enabled is required"},
	} {
		status, body := e.do(t, "PATCH", "/api/mcp/config", "", c.body)
		if status != c.status || errCode(body) != c.code || !strings.Contains(errMessage(body), c.msg) {
			t.Errorf("%s: %d %v", c.body, status, body)
		}
	}
	if now, _ := os.ReadFile(e.cfg); !bytes.Equal(now, before) || e.resets.Load() != 1 {
		t.Fatalf("a refused PATCH wrote the file or reset the caches")
	}
	// Disabling never validates.
	if status, body := e.do(t, "PATCH", "/api/mcp/config", "", `{"server_name": "bad", "enabled": false}`); status != 200 {
		t.Fatalf("disable bad: %d %v", status, body)
	}
	// Enabling a valid server validates only that server.
	if status, body := e.do(t, "PATCH", "/api/mcp/config", "", `{"server_name": "a", "enabled": true}`); status != 200 || at(body, "mcp_servers", "a", "enabled") != true {
		t.Fatalf("enable a: %d %v", status, body)
	}
	assertNoSecrets(t, e)
}

// TestPutConfigFollowsSymlink: a config path that is a symlink (a mounted
// ConfigMap, say) stays a link; its target gets the new content.
func TestPutConfigFollowsSymlink(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{})
	target := e.cfg + ".real"
	if err := os.Rename(e.cfg, target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, e.cfg); err != nil {
		t.Fatal(err)
	}
	if status, body := e.do(t, "PUT", "/api/mcp/config", "", `{"mcp_servers": {"u": {"command": "uvx", "args": ["mcp-server-time"]}}}`); status != 200 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	if fi, err := os.Lstat(e.cfg); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the config path is no longer a symlink: %v", err)
	}
	if at(decodeFile(t, target), "mcpServers", "u", "command") != "uvx" {
		t.Fatal("the link's target was not written")
	}
}
