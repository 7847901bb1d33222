package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzParseExtensions parses arbitrary bytes as extensions_config.json: it
// never panics, accepts only JSON objects, is deterministic, keeps server
// names unique (an empty name is allowed but for task servers), and what it accepts can be cross-checked
// against the default settings and masked for the API.
func FuzzParseExtensions(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `{"mcpServers": null}`, `{"mcpServers": []}`,
		`{"mcpServers": {"a": {"type": "stdio", "command": "x", "args": ["-y"], "env": {"TOKEN": "s3cret"}}}}`,
		`{"mcpServers": {"h": {"type": "http", "url": "https://u:p@example.com/mcp?k=v", "headers": {"Authorization": "Bearer t"},
			"tool_call_timeout": 1.5, "session_init_timeout": null,
			"task_toolsets": [{"name": "r", "submit_tool": "s", "status_tool": "g", "cancel_tool": "c"}]}}}`,
		`{"mcpServers": {"o": {"type": "sse", "url": "http://127.0.0.1/sse", "oauth": {"enabled": true, "token_url": "http://x", "client_id": "id", "client_secret": "sec"}}}}`,
		`{"mcpServers": {"a": {"type": "stdio", "command": "x"}, "a": {"type": "http", "url": "http://y"}}, "mcpInterceptors": "m:f"}`,
		`{"mcpServers": {"": {"type": "stdio"}, "b": 1, "c": {"enabled": "yes"}}, "mcpInterceptors": [1, null, "x"]}`,
		`{"mcpServers": {"a": {"type": "stdio", "command": "x", "tool_call_timeout": -1e308, "cwd": "../.."}}}`,
	} {
		f.Add([]byte(seed))
	}
	settings := DefaultSettings()
	f.Fuzz(func(t *testing.T, data []byte) {
		ext, err := ParseExtensions("fuzz.json", data)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) != nil {
			t.Fatalf("accepted %q, which is not a JSON object", data)
		}
		again, err := ParseExtensions("fuzz.json", data)
		if err != nil {
			t.Fatalf("second parse failed: %v", err)
		}
		var names []string
		for i, s := range ext.Servers {
			if slices.Contains(names, s.Name) {
				t.Fatalf("server %d repeats the name %q", i, s.Name)
			}
			names = append(names, s.Name)
			if again.Servers[i].Name != s.Name || !reflect.DeepEqual(again.Servers[i].TaskToolsets, s.TaskToolsets) {
				t.Fatalf("parse is not deterministic at server %d", i)
			}
			_ = s.TaskEnabled()
			_ = s.OAuthEnabled()
			_ = s.ValidateCwd()
		}
		_ = ext.InterceptorsFingerprint()
		_ = CrossCheck(ext, &settings)
		if _, present := top["mcpServers"]; present {
			if _, err := ServerEntries(data); err != nil {
				t.Fatalf("accepted file cannot be read in order: %v", err)
			}
		}
	})
}

// FuzzSettings decodes arbitrary bytes as config.yaml the way LoadSettings
// does (onto the defaults, unknown keys refused, $VAR expansion) and
// validates the result: nothing panics, errors name the file, and a
// decoded file's problems each name a field.
func FuzzSettings(f *testing.F) {
	for _, seed := range []string{
		"", "---\n", "nats:\n  url: nats://127.0.0.1:4222\n",
		"database:\n  backend: postgres\n  url: $DATABASE_URL\n",
		"mcp_tasks:\n  enabled: true\n  poll_interval_seconds: 0\n  lease_seconds: 99999\n",
		"api:\n  listen: 0.0.0.0:1\n  keys:\n    - sha256: zz\n      user_id: u\n      role: root\n",
		"log: {level: loud, format: xml}\nunknown: 1\n",
		"a: &x {b: *x}\n", "stdio_pool:\n  max_sessions: -1\n", "guardrails:\n  provider:\n    use: x\n    config: {k: [1, {a: b}]}\n",
		"workspace: [1, 2]\n", "tool_search:\n  auto_promote_top_k: 1e9\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := DefaultSettings()
		if err := decodeSettings("config.yaml", data, &s); err != nil {
			if !strings.Contains(err.Error(), "config.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		expandStrings(reflect.ValueOf(&s).Elem())
		for _, p := range s.Validate() {
			if p.Field == "" && p.Message == "" {
				t.Fatalf("a problem names nothing: %+v", p)
			}
		}
	})
}
