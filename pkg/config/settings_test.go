package config

import (
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/pinning"
)

func TestDefaultSettings(t *testing.T) {
	t.Parallel()
	d := DefaultSettings()
	checks := map[string][2]any{
		"nats.url":                         {d.NATS.URL, "nats://127.0.0.1:4222"},
		"nats.replicas":                    {d.NATS.Replicas, ReplicasAuto},
		"nats.namespace":                   {d.NATS.Namespace, ""},
		"nats.bind_identity":               {d.NATS.BindIdentity, false},
		"nats.token_file":                  {d.NATS.TokenFile, ""},
		"database.backend":                 {d.Database.Backend, "memory"},
		"database.path":                    {d.Database.Path, ".mcpbus/mcpbus.db"},
		"mcp_tasks.enabled":                {d.MCPTasks.Enabled, false},
		"tool_search.enabled":              {d.ToolSearch.Enabled, false},
		"tool_search.top_k":                {d.ToolSearch.AutoPromoteTopK, 3},
		"guardrails.enabled":               {d.Guardrails.Enabled, false},
		"guardrails.fail_closed":           {d.Guardrails.FailClosed, true},
		"guardrails.provider.use":          {d.Guardrails.Provider.Use, ""},
		"deployment.multi_instance":        {d.Deployment.MultiInstance, false},
		"api.listen":                       {d.API.Listen, "127.0.0.1:8001"},
		"api.max_body_bytes":               {d.API.MaxBodyBytes, int64(1048576)},
		"api.read_timeout_seconds":         {d.API.ReadTimeoutSeconds, 30},
		"api.read_header_timeout":          {d.API.ReadHeaderTimeoutSeconds, 10},
		"api.idle_timeout_seconds":         {d.API.IdleTimeoutSeconds, 120},
		"api.max_header_bytes":             {d.API.MaxHeaderBytes, 65536},
		"personal.max_per_user":            {d.PersonalConnections.MaxPerUser, 20},
		"api.mcp.page_size":                {d.API.MCP.PageSize, 100},
		"api.console.session_seconds":      {d.API.Console.SessionSeconds, 28800},
		"api.console.sign_in_failures":     {d.API.Console.SignInFailures, 10},
		"api.console.sign_in_window":       {d.API.Console.SignInWindowSeconds, 900},
		"api.mcp.session_idle":             {d.API.MCP.SessionIdleSeconds, 1800},
		"api.mcp.max_streams":              {d.API.MCP.MaxStreamsPerUser, 8},
		"workspace.root":                   {d.Workspace.Root, ".mcpbus/workspace"},
		"stdio_pool.max_sessions":          {d.StdioPool.MaxSessions, 256},
		"stdio_pool.max_sessions_per_user": {d.StdioPool.MaxSessionsPerUser, 32},
		"log.level":                        {d.Log.Level, "info"},
		"log.format":                       {d.Log.Format, "text"},
		"observability.tracing.enabled":    {d.Observability.Tracing.Enabled, false},
		"observability.tracing.protocol":   {d.Observability.Tracing.Protocol, "http/protobuf"},
		"observability.tracing.ratio":      {d.Observability.Tracing.SampleRatio, 1.0},
		"observability.tracing.prefix":     {d.Observability.Tracing.ServiceNamePrefix, "mcpbus-"},
	}
	for k, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", k, c[0], c[1])
		}
	}
	wantTasks := MCPTasks{false, 5, 120, 8, 300, 60, 3, 65536, 2000}
	if d.MCPTasks != wantTasks {
		t.Errorf("mcp_tasks %+v", d.MCPTasks)
	}
	if ps := d.Validate(); len(ps) != 0 {
		t.Errorf("defaults must validate cleanly: %v", ps)
	}
}

func TestFindSettingsPath(t *testing.T) {
	t.Setenv(EnvConfig, "")
	if p, e := FindSettingsPath("x.yaml", ReadEnv()); p != "x.yaml" || !e {
		t.Fatal("flag")
	}
	if p, e := FindSettingsPath("", ReadEnv()); p != DefaultSettingsFile || e {
		t.Fatal("default")
	}
	t.Setenv(EnvConfig, "env.yaml")
	if p, e := FindSettingsPath("", ReadEnv()); p != "env.yaml" || !e {
		t.Fatal("env")
	}
}

func clearSettingsEnv(t *testing.T) {
	for _, k := range []string{EnvNATSURL, EnvDatabaseURL, EnvAPIListen, EnvConfig} {
		t.Setenv(k, "")
	}
}

func TestLoadSettingsMissing(t *testing.T) {
	clearSettingsEnv(t)
	missing := filepath.Join(t.TempDir(), "config.yaml")
	s, err := LoadSettings(missing, false, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultSettings()
	s.Problems, d.Problems = nil, nil
	if !reflect.DeepEqual(*s, d) {
		t.Fatalf("missing non-explicit file must give defaults, got %+v", s)
	}
	_, err = LoadSettings(missing, true, ReadEnv())
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("explicit missing: %v", err)
	}
}

func TestLoadSettingsFile(t *testing.T) {
	clearSettingsEnv(t)
	t.Setenv("MCPBUS_T_DB", "postgres://u:p@db/mcpbus")
	t.Setenv("MCPBUS_T_USE", "nats:guard.check")
	p := writeFile(t, t.TempDir(), "config.yaml", `
nats:
  url: nats://bus:4222
database:
  backend: postgres
  url: $MCPBUS_T_DB
mcp_tasks:
  enabled: true
  lease_seconds: 60
guardrails:
  enabled: true
  provider:
    use: $MCPBUS_T_USE
    config:
      denied_tools: ["$MCPBUS_T_DB", "x"]
      note: "Bearer $MCPBUS_T_DB"
api:
  keys:
    - sha256: `+strings.Repeat("AB", 32)+`
      user_id: alice
      role: admin
log:
  format: json
`)
	s, err := LoadSettings(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if s.Path != p || s.NATS.URL != "nats://bus:4222" || s.Database.URL != "postgres://u:p@db/mcpbus" {
		t.Fatalf("got %+v", s)
	}
	if !s.MCPTasks.Enabled || s.MCPTasks.LeaseSeconds != 60 || s.MCPTasks.PollIntervalSeconds != 5 {
		t.Fatalf("unspecified keys keep defaults: %+v", s.MCPTasks)
	}
	if s.Guardrails.Provider.Use != "nats:guard.check" || !s.Guardrails.FailClosed {
		t.Fatalf("guardrails %+v", s.Guardrails)
	}
	cfg := s.Guardrails.Provider.Config
	if l := cfg["denied_tools"].([]any); l[0] != "postgres://u:p@db/mcpbus" || cfg["note"] != "Bearer $MCPBUS_T_DB" {
		t.Fatalf("config expansion %v", cfg)
	}
	if s.API.Keys[0].SHA256 != strings.Repeat("ab", 32) {
		t.Fatalf("sha256 lowercased: %q", s.API.Keys[0].SHA256)
	}
	if s.Log.Format != "json" || s.Log.Level != "info" || s.API.Listen != "127.0.0.1:8001" {
		t.Fatalf("log/api %+v %+v", s.Log, s.API)
	}
}

func TestLoadSettingsEmptyFile(t *testing.T) {
	t.Parallel()
	p := writeFile(t, t.TempDir(), "config.yaml", "# nothing\n")
	s, err := readSettings(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	if s.NATS.URL != DefaultSettings().NATS.URL || s.Path != p {
		t.Fatalf("got %+v", s)
	}
}

func TestLoadSettingsFileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top key", "nats:\n  url: x\nnatz: {}\n", []string{"unknown key \"natz\"", "line 3"}},
		{"unknown nested key", "mcp_tasks:\n  enabled: true\n  poll_interval: 3\n", []string{"unknown key \"mcp_tasks.poll_interval\"", "line 3"}},
		{"unknown key in list", "api:\n  keys:\n    - sha256: x\n      user: bob\n", []string{"unknown key \"api.keys[0].user\""}},
		{"syntax", "nats:\n  url: [unclosed\n", []string{"not valid YAML", "line"}},
		{"bad type", "mcp_tasks:\n  lease_seconds: lots\n", []string{"line 2: mcp_tasks.lease_seconds: expected a whole number, got a text value"}},
		// Every mistake at once, in the file's terms: a misspelt key with
		// what was meant, a list given as text, a flag given as a number.
		{"all at once", "api:\n  keys: abc\n  listn: x\nmcp_tasks:\n  enabled: 3\n", []string{
			`line 2: api.keys: expected a list, got a text value`, `line 3: unknown key "api.listn" (did you mean "api.listen"?)`,
			`line 5: mcp_tasks.enabled: expected true or false, got a whole number`}},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", []string{"line"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := writeFile(t, t.TempDir(), "config.yaml", tc.yaml)
			_, err := readSettings(p, true, ReadEnv())
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range append(tc.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "cannot unmarshal") || regexp.MustCompile(`config\.[A-Z]`).MatchString(err.Error()) {
				t.Errorf("error %q names Go types", err)
			}
		})
	}
}

func TestValidateSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*Settings)
		field  string
		msg    string
	}{
		{"poll low", func(s *Settings) { s.MCPTasks.PollIntervalSeconds = 0 }, "mcp_tasks.poll_interval_seconds", "must be between 1 and 300, got 0"},
		{"poll high", func(s *Settings) { s.MCPTasks.PollIntervalSeconds = 301 }, "mcp_tasks.poll_interval_seconds", "between 1 and 300"},
		{"lease", func(s *Settings) { s.MCPTasks.LeaseSeconds = 4 }, "mcp_tasks.lease_seconds", "between 5 and 3600"},
		{"polls", func(s *Settings) { s.MCPTasks.MaxConcurrentPolls = 65 }, "mcp_tasks.max_concurrent_polls", "between 1 and 64"},
		{"backoff", func(s *Settings) { s.MCPTasks.MaxPollBackoffSeconds = 0 }, "mcp_tasks.max_poll_backoff_seconds", "between 1 and 3600"},
		{"input required", func(s *Settings) { s.MCPTasks.InputRequiredPollIntervalSeconds = 3601 }, "mcp_tasks.input_required_poll_interval_seconds", "between 5 and 3600"},
		{"degraded", func(s *Settings) { s.MCPTasks.TrackingDegradedAfterErrors = 101 }, "mcp_tasks.tracking_degraded_after_errors", "between 1 and 100"},
		{"result bytes", func(s *Settings) { s.MCPTasks.MaxResultBytes = 1023 }, "mcp_tasks.max_result_bytes", "between 1024 and 10485760"},
		{"preview", func(s *Settings) { s.MCPTasks.ResultPreviewMaxChars = 63 }, "mcp_tasks.result_preview_max_chars", "between 64 and 100000"},
		{"backend", func(s *Settings) { s.Database.Backend = "mysql" }, "database.backend", "memory, sqlite or postgres"},
		{"postgres url", func(s *Settings) { s.Database.Backend = BackendPostgres }, "database.url", "required"},
		{"sqlite path", func(s *Settings) { s.Database.Backend, s.Database.Path = BackendSQLite, "" }, "database.path", "required"},
		{"key sha", func(s *Settings) { s.API.Keys = []APIKey{{SHA256: "abc", UserID: "u", Role: "user"}} }, "api.keys[0].sha256", "64-hex"},
		{"key sha not hex", func(s *Settings) {
			s.API.Keys = []APIKey{{SHA256: strings.Repeat("zz", 32), UserID: "u", Role: "user"}}
		}, "api.keys[0].sha256", "64-hex"},
		{"key dup", func(s *Settings) {
			k := APIKey{SHA256: strings.Repeat("a", 64), UserID: "u", Role: "user"}
			s.API.Keys = []APIKey{k, k}
		}, "api.keys[1].sha256", "repeats"},
		{"key user", func(s *Settings) { s.API.Keys = []APIKey{{SHA256: strings.Repeat("a", 64), Role: "admin"}} }, "api.keys[0].user_id", "empty"},
		{"key role", func(s *Settings) { s.API.Keys = []APIKey{{SHA256: strings.Repeat("a", 64), UserID: "u", Role: "root"}} }, "api.keys[0].role", "admin or user"},
		{"max sessions", func(s *Settings) { s.StdioPool.MaxSessions = 0 }, "stdio_pool.max_sessions", "at least 1"},
		{"per-user sessions", func(s *Settings) { s.StdioPool.MaxSessionsPerUser = 257 }, "stdio_pool.max_sessions_per_user", "from 1 to stdio_pool.max_sessions"},
		{"log format", func(s *Settings) { s.Log.Format = "xml" }, "log.format", "text or json"},
		{"log level", func(s *Settings) { s.Log.Level = "loud" }, "log.level", "debug, info"},
		{"tracing protocol", func(s *Settings) { s.Observability.Tracing.Protocol = "thrift" }, "observability.tracing.protocol", "http/protobuf or grpc"},
		{"tracing ratio", func(s *Settings) { s.Observability.Tracing.SampleRatio = 1.5 }, "observability.tracing.sample_ratio", "between 0 and 1"},
		{"tracing endpoint", func(s *Settings) { s.Observability.Tracing.Endpoint = "collector:4318" }, "observability.tracing.endpoint", "http:// or https://"},
		{"tracing endpoint secret", func(s *Settings) { s.Observability.Tracing.Endpoint = "https://u:pw@collector:4318" }, "observability.tracing.endpoint", "OTEL_EXPORTER_OTLP_HEADERS"},
		{"body bytes", func(s *Settings) { s.API.MaxBodyBytes = 0 }, "api.max_body_bytes", "at least 1"},
		{"listen", func(s *Settings) { s.API.Listen = "" }, "api.listen", "empty"},
		{"read timeout", func(s *Settings) { s.API.ReadTimeoutSeconds = 0 }, "api.read_timeout_seconds", "between 1 and 3600"},
		{"header timeout", func(s *Settings) { s.API.ReadHeaderTimeoutSeconds = 601 }, "api.read_header_timeout_seconds", "between 1 and 600"},
		{"idle timeout", func(s *Settings) { s.API.IdleTimeoutSeconds = -1 }, "api.idle_timeout_seconds", "between 1 and 3600"},
		{"header bytes", func(s *Settings) { s.API.MaxHeaderBytes = 100 }, "api.max_header_bytes", "between 4096 and 1048576"},
		{"console session", func(s *Settings) { s.API.Console.SessionSeconds = 30 }, "api.console.session_seconds", "from 60 to 604800"},
		{"sign-in failures", func(s *Settings) { s.API.Console.SignInFailures = 0 }, "api.console.sign_in_failures", "from 1 to 10000"},
		{"sign-in window", func(s *Settings) { s.API.Console.SignInWindowSeconds = 5 }, "api.console.sign_in_window_seconds", "from 10 to 86400"},
		{"client id url http", func(s *Settings) { s.API.OAuthClientIDURL = "http://mcpbus.example.com/cimd.json" }, "api.oauth_client_id_url", "https URL with a path"},
		{"client id url no path", func(s *Settings) { s.API.OAuthClientIDURL = "https://mcpbus.example.com/" }, "api.oauth_client_id_url", "https URL with a path"},
		{"allowed origin", func(s *Settings) { s.API.AllowedOrigins = []string{"http://localhost:3000", "localhost:3000/x"} }, "api.allowed_origins[1]", "an origin such as"},
		{"max per user", func(s *Settings) { s.PersonalConnections.MaxPerUser = 0 }, "personal_connections.max_per_user", "between 1 and 1000"},
		{"mcp page size", func(s *Settings) { s.API.MCP.PageSize = 0 }, "api.mcp.page_size", "at least 1"},
		{"mcp idle", func(s *Settings) { s.API.MCP.SessionIdleSeconds = -1 }, "api.mcp.session_idle_seconds", "at least 1"},
		{"mcp streams", func(s *Settings) { s.API.MCP.MaxStreamsPerUser = 0 }, "api.mcp.max_streams_per_user", "at least 1"},
		{"mcp catalog ttl", func(s *Settings) { s.API.MCP.CatalogTTLSeconds = -1 }, "api.mcp.catalog_ttl_seconds", "0 or more"},
		{"nats url", func(s *Settings) { s.NATS.URL = " " }, "nats.url", "empty"},
		{"nats replicas", func(s *Settings) { s.NATS.Replicas = -1 }, "nats.replicas", "auto or 1 to 5"},
		{"nats replicas high", func(s *Settings) { s.NATS.Replicas = 7 }, "nats.replicas", "auto or 1 to 5"},
		{"nats namespace dot", func(s *Settings) { s.NATS.Namespace = "stg.eu" }, "nats.namespace", "letters, digits"},
		{"nats namespace wildcard", func(s *Settings) { s.NATS.Namespace = "stg*" }, "nats.namespace", "letters, digits"},
		{"nats namespace long", func(s *Settings) { s.NATS.Namespace = strings.Repeat("n", 33) }, "nats.namespace", "1 to 32"},
		{"workspace", func(s *Settings) { s.Workspace.Root = "" }, "workspace.root", "empty"},
		{"guardrail provider", func(s *Settings) { s.Guardrails.Enabled = true }, "guardrails.provider.use", "allowlist"},
		{"audit database on memory", func(s *Settings) { s.Audit.Database = true }, "audit.database", "sqlite or postgres"},
		{"guardrail nats subject", func(s *Settings) { s.Guardrails.Enabled, s.Guardrails.Provider.Use = true, "nats:" }, "guardrails.provider.use", "nats:<subject>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			tc.mutate(&s)
			ps := s.Validate()
			if len(ps) != 1 || ps[0].Severity != SeverityError || ps[0].Field != tc.field || !strings.Contains(ps[0].Message, tc.msg) {
				t.Fatalf("want one error %q containing %q, got %v", tc.field, tc.msg, ps)
			}
			if err := ErrorOf(ps); err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("joined error must name the key: %v", err)
			}
		})
	}
}

func TestValidateSettingsAccepts(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.Guardrails.Enabled, s.Guardrails.Provider.Use = true, "allowlist"
	s.Database.Backend = BackendSQLite
	s.Log.Level = "DEBUG"
	s.Audit.Database = true
	s.API.Keys = []APIKey{{SHA256: strings.Repeat("0f", 32), UserID: "u", Role: "user"}}
	if ps := s.Validate(); len(ps) != 0 {
		t.Fatalf("got %v", ps)
	}
}

func TestAutoPromoteTopKClamped(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{0: 1, -4: 1, 9: 5, 3: 3} {
		s := DefaultSettings()
		s.ToolSearch.AutoPromoteTopK = in
		ps := s.Validate()
		if s.ToolSearch.AutoPromoteTopK != want {
			t.Errorf("%d clamped to %d, want %d", in, s.ToolSearch.AutoPromoteTopK, want)
		}
		if in != want && (len(ps) != 1 || ps[0].Severity != SeverityWarning || ps[0].Field != "tool_search.auto_promote_top_k") {
			t.Errorf("%d: want one warning, got %v", in, ps)
		}
		if HasErrors(ps) || !reflect.DeepEqual(s.Problems, ps) {
			t.Errorf("%d: problems %v", in, ps)
		}
	}
}

func TestLoadSettingsValidationError(t *testing.T) {
	clearSettingsEnv(t)
	p := writeFile(t, t.TempDir(), "config.yaml", "mcp_tasks:\n  poll_interval_seconds: 0\n  lease_seconds: 1\ntool_search:\n  auto_promote_top_k: 10\n")
	_, err := LoadSettings(p, true, ReadEnv())
	if err == nil {
		t.Fatal("want error")
	}
	for _, w := range []string{p, "mcp_tasks.poll_interval_seconds", "between 1 and 300, got 0", "mcp_tasks.lease_seconds"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "auto_promote_top_k") {
		t.Errorf("warnings are not part of the error: %v", err)
	}
}

func TestSettingsEnvOverrides(t *testing.T) {
	clearSettingsEnv(t)
	dir := t.TempDir()
	cases := []struct {
		name, yaml, natsEnv, dbEnv, listenEnv  string
		wantNATS, wantDB, wantBackend, wantAPI string
	}{
		{"none", "", "", "", "", "nats://127.0.0.1:4222", "", "memory", "127.0.0.1:8001"},
		{"all", "", "nats://env:4222", "postgres://env/db", "0.0.0.0:9000", "nats://env:4222", "postgres://env/db", "postgres", "0.0.0.0:9000"},
		{"sqlite kept", "database:\n  backend: sqlite\n", "", "postgres://env/db", "", "nats://127.0.0.1:4222", "postgres://env/db", "sqlite", "127.0.0.1:8001"},
		{"env beats file", "nats:\n  url: nats://file:4222\n", "nats://env:4222", "", "", "nats://env:4222", "", "memory", "127.0.0.1:8001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvNATSURL, tc.natsEnv)
			t.Setenv(EnvDatabaseURL, tc.dbEnv)
			t.Setenv(EnvAPIListen, tc.listenEnv)
			p := writeFile(t, dir, tc.name+".yaml", tc.yaml)
			s, err := LoadSettings(p, true, ReadEnv())
			if err != nil {
				t.Fatal(err)
			}
			if s.NATS.URL != tc.wantNATS || s.Database.URL != tc.wantDB || s.Database.Backend != tc.wantBackend || s.API.Listen != tc.wantAPI {
				t.Fatalf("got nats %q db %q/%q api %q", s.NATS.URL, s.Database.Backend, s.Database.URL, s.API.Listen)
			}
		})
	}
}

func TestDatabaseBackendSetTellsTheFileFromTheDefault(t *testing.T) {
	clearSettingsEnv(t)
	dir := t.TempDir()
	for content, want := range map[string]bool{
		"log:\n  level: info\n":          false,
		"database:\n  backend: memory\n": true,
		"database:\n  backend: sqlite\n": true,
	} {
		s, err := LoadSettings(writeFile(t, dir, "config.yaml", content), true, ReadEnv())
		if err != nil {
			t.Fatal(err)
		}
		if s.Database.BackendSet != want || s.Database.Backend == "" {
			t.Errorf("%q: backend %q set %v, want set %v", content, s.Database.Backend, s.Database.BackendSet, want)
		}
	}
}

func TestPinningPolicyOfAServer(t *testing.T) {
	s := DefaultSettings().Pinning
	own := &Server{Name: "a", Pinning: pinning.Log}
	plain := &Server{Name: "b"}
	if got := s.Policy(plain, false); got != pinning.Off {
		t.Fatalf("default for a deployment server: %s", got)
	}
	if got := s.Policy(plain, true); got != pinning.Log {
		t.Fatalf("default for a personal connection: %s", got)
	}
	if got := s.Policy(own, false); got != pinning.Log {
		t.Fatalf("a server's own key: %s", got)
	}
	s.RaiseFloor("a", pinning.RequireApproval)
	s.RaiseFloor("a", pinning.Log) // never lowers
	if got := s.Policy(own, false); got != pinning.RequireApproval {
		t.Fatalf("a floor from a virtual server: %s", got)
	}
	bad := DefaultSettings()
	bad.Pinning.Default = "sometimes"
	if probs := bad.Validate(); !hasProblem(probs, "error", "pinning.default", "require_approval") {
		t.Fatalf("an unknown policy must be an error naming pinning.default: %+v", probs)
	}
}

func TestClientIDURL(t *testing.T) {
	t.Parallel()
	a := APISettings{}
	if got := a.ClientIDURL(); got != "" {
		t.Fatalf("without a public URL: %q", got)
	}
	a.PublicURL = "https://mcpbus.example.com"
	if got := a.ClientIDURL(); got != "https://mcpbus.example.com/oauth/client-metadata.json" {
		t.Fatalf("default: %q", got)
	}
	a.OAuthClientIDURL = "https://example.com/mcpbus/client.json"
	if got := a.ClientIDURL(); got != a.OAuthClientIDURL {
		t.Fatalf("set: %q", got)
	}
}
