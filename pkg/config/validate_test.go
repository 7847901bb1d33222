package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateFiles(t *testing.T) {
	t.Setenv(EnvCredentialsKey, "")
	t.Setenv(EnvDeerFlowCredentialsKey, "")
	clearSettingsEnv(t)
	dir := t.TempDir()
	goodExt := writeFile(t, dir, "good.json", `{"mcpServers": {"a": {"command": "x"}}}`)
	badJSON := writeFile(t, dir, "bad.json", "{\n\"mcpServers\": {\n  \"a\": }\n}")
	mixed := writeFile(t, dir, "mixed.json", `{"mcpServers": {"a": {"command": "x"}, "b": {"type": "http"},
		"c": {"command": "x", "cwd": "`+filepath.Join(dir, "nope")+`"},
		"t": {"type": "http", "url": "http://t", "task_toolsets": [{"name": "n", "submit_tool": "s", "status_tool": "st", "cancel_tool": "c"}]},
		"o": {"type": "http", "url": "http://o", "oauth": {"token_url": "http://tok", "grant_type": "refresh_token"}}}}`)
	goodYAML := writeFile(t, dir, "good.yaml", "log:\n  level: info\n")
	multi := writeFile(t, dir, "multi.yaml", "deployment:\n  multi_instance: true\nmcp_tasks:\n  enabled: true\ndatabase:\n  backend: sqlite\n")
	badYAML := writeFile(t, dir, "bad.yaml", "mcp_tasks:\n  lease_seconds: 1\n")
	unknownYAML := writeFile(t, dir, "unknown.yaml", "apis: {}\n")
	missing := filepath.Join(dir, "missing")

	cases := []struct {
		name         string
		ext          string
		extExplicit  bool
		yaml         string
		yamlExplicit bool
		wantErrors   bool
		wantContains []string
	}{
		{"clean", goodExt, true, goodYAML, true, false, nil},
		{"missing non-explicit", missing, false, missing, false, false, nil},
		{"missing explicit", missing, true, missing, true, true, []string{"extensions config file " + missing, "config file " + missing}},
		{"bad json", badJSON, true, goodYAML, true, true, []string{"line 3"}},
		{"server problems", mixed, true, goodYAML, true, true, []string{"server 'b': url", "server 'c': cwd", "mcp_tasks.enabled", "database.backend sqlite or postgres"}},
		{"multi instance", mixed, true, multi, true, true, []string{"server 'o': oauth.grant_type", EnvCredentialsKey}},
		{"bad yaml values", goodExt, true, badYAML, true, true, []string{"mcp_tasks.lease_seconds"}},
		{"unknown yaml key", goodExt, true, unknownYAML, true, true, []string{`unknown key "apis"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := ValidateFiles(tc.ext, tc.extExplicit, tc.yaml, tc.yamlExplicit, ReadEnv())
			if HasErrors(ps) != tc.wantErrors {
				t.Fatalf("errors=%v want %v: %v", HasErrors(ps), tc.wantErrors, ps)
			}
			var all []string
			for _, p := range ps {
				all = append(all, p.String())
			}
			joined := strings.Join(all, "\n")
			for _, w := range tc.wantContains {
				if !strings.Contains(joined, w) {
					t.Errorf("problems lack %q:\n%s", w, joined)
				}
			}
		})
	}

	t.Run("credentials key satisfies multi instance", func(t *testing.T) {
		t.Setenv(EnvDeerFlowCredentialsKey, "k")
		for _, p := range ValidateFiles(mixed, true, multi, true, ReadEnv()) {
			if p.Field == "oauth.grant_type" {
				t.Fatalf("unexpected %v", p)
			}
		}
	})
}

func TestCredentialsKey(t *testing.T) {
	t.Parallel()
	if k := EnvOf(map[string]string{EnvDeerFlowCredentialsKey: "alias"}).CredentialsKey(); k != "alias" {
		t.Fatalf("alias: %q", k)
	}
	if k := EnvOf(map[string]string{EnvCredentialsKey: "main", EnvDeerFlowCredentialsKey: "alias"}).CredentialsKey(); k != "main" {
		t.Fatalf("main wins: %q", k)
	}
	if k := (Env{}).CredentialsKey(); k != "" {
		t.Fatalf("zero Env: %q", k)
	}
}

// operatorMistakes are the extensions-file mistakes `config validate` and
// the config API must both catch, each with the field it names and a part
// of the message.
var operatorMistakes = []struct {
	name, server, field, message string
}{
	{"misspelt key", `{"type": "http", "url": "http://h/mcp", "tool_call_timout": 5}`, "tool_call_timout", "did you mean 'tool_call_timeout'?"},
	{"url without a scheme", `{"type": "http", "url": "h:8080/mcp"}`, "url", "must use http or https"},
	{"url without a scheme or host", `{"type": "http", "url": "/mcp"}`, "url", "must be an absolute http:// or https:// URL"},
	{"ftp url", `{"type": "sse", "url": "ftp://h/sse"}`, "url", "must use http or https, got scheme 'ftp'"},
	{"url without a host", `{"type": "http", "url": "http:///mcp"}`, "url", "must name a host"},
	{"header name with a space", `{"type": "http", "url": "http://h/mcp", "headers": {"X Key": "v"}}`, "headers", "not a valid HTTP token"},
}

func TestValidateFilesCatchesOperatorMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, m := range operatorMistakes {
		path := writeFile(t, dir, "ext.json", `{"mcpServers": {"s": `+m.server+`}}`)
		ps := ValidateFiles(path, true, filepath.Join(dir, "none.yaml"), false, EnvOf(nil))
		if !HasErrors(ps) || !hasProblem(ps, SeverityError, m.field, m.message) {
			t.Errorf("%s: problems %v; want an error on s.%s with %q", m.name, ps, m.field, m.message)
		}
	}
	path := writeFile(t, dir, "ext.json", `{"mcpServers": {}, "mcpInterceptors": ["nope", "request_loger", "nats:", "set_header:X=1", "nats:audit.calls"]}`)
	ps := ValidateFiles(path, true, filepath.Join(dir, "none.yaml"), false, EnvOf(nil))
	for _, want := range []struct{ field, msg string }{
		{"mcpInterceptors[0]", "no interceptor named 'nope'"},
		{"mcpInterceptors[1]", "did you mean 'request_logger'?"},
		{"mcpInterceptors[2]", "followed by a NATS subject"},
	} {
		if !hasProblem(ps, SeverityError, want.field, want.msg) {
			t.Errorf("problems %v; want %s: %q", ps, want.field, want.msg)
		}
	}
	if n := len(ps); n != 3 {
		t.Errorf("problems %v; want exactly the three bad entries", ps)
	}
	path = writeFile(t, dir, "ext.json", `{"mcpServer": {}}`)
	if ps := ValidateFiles(path, true, filepath.Join(dir, "none.yaml"), false, EnvOf(nil)); !hasProblem(ps, SeverityError, "mcpServer", "did you mean 'mcpServers'?") {
		t.Errorf("misspelt top-level key: %v", ps)
	}
}

// TestShippedExamplesAreValid: the examples the documentation points at
// pass every rule of `config validate`, warnings included.
func TestShippedExamplesAreValid(t *testing.T) {
	clearSettingsEnv(t)
	ext := filepath.Join("..", "..", "examples", "extensions_config.example.json")
	yml := filepath.Join("..", "..", "examples", "config.example.yaml")
	for _, p := range ValidateFiles(ext, true, yml, true, EnvOf(nil)) {
		if p.Severity == SeverityError || (p.Field != "cwd" && p.Field != "task_toolsets") {
			t.Errorf("%s: %s", p.Severity, p)
		}
	}
}
