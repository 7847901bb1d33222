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
