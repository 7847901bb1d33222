package config

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// intRange is one bounded integer setting.
type intRange struct {
	key      string
	val      *int
	min, max int
}

// Validate checks the settings, clamps tool_search.auto_promote_top_k to
// 1..5 (with a warning) and lowercases api.keys[].sha256 in place. It stores
// and returns every finding; Severity "error" ones make LoadSettings fail.
func (s *Settings) Validate() []Problem {
	v := settingsValidator{file: settingsLabel(s)}
	t := &s.MCPTasks
	for _, r := range []intRange{
		{"mcp_tasks.poll_interval_seconds", &t.PollIntervalSeconds, 1, 300},
		{"mcp_tasks.lease_seconds", &t.LeaseSeconds, 5, 3600},
		{"mcp_tasks.max_concurrent_polls", &t.MaxConcurrentPolls, 1, 64},
		{"mcp_tasks.max_poll_backoff_seconds", &t.MaxPollBackoffSeconds, 1, 3600},
		{"mcp_tasks.input_required_poll_interval_seconds", &t.InputRequiredPollIntervalSeconds, 5, 3600},
		{"mcp_tasks.tracking_degraded_after_errors", &t.TrackingDegradedAfterErrors, 1, 100},
		{"mcp_tasks.max_result_bytes", &t.MaxResultBytes, 1024, 10485760},
		{"mcp_tasks.result_preview_max_chars", &t.ResultPreviewMaxChars, 64, 100000},
		{"discovery.retry_initial_seconds", &s.Discovery.RetryInitialSeconds, 1, 3600},
		{"discovery.retry_max_seconds", &s.Discovery.RetryMaxSeconds, 1, 86400},
		{"api.read_timeout_seconds", &s.API.ReadTimeoutSeconds, 1, 3600},
		{"api.read_header_timeout_seconds", &s.API.ReadHeaderTimeoutSeconds, 1, 600},
		{"api.idle_timeout_seconds", &s.API.IdleTimeoutSeconds, 1, 3600},
		{"api.max_header_bytes", &s.API.MaxHeaderBytes, 4096, 1 << 20},
		{"personal_connections.max_per_user", &s.PersonalConnections.MaxPerUser, 1, 1000},
		{"shutdown.drain_seconds", &s.Shutdown.DrainSeconds, 1, 3600},
	} {
		if *r.val < r.min || *r.val > r.max {
			v.errorf(r.key, "must be between %d and %d, got %d", r.min, r.max, *r.val)
		}
	}
	if d := s.Discovery; d.RetryMaxSeconds < d.RetryInitialSeconds {
		v.errorf("discovery.retry_max_seconds", "must not be below discovery.retry_initial_seconds (%d), got %d", d.RetryInitialSeconds, d.RetryMaxSeconds)
	}
	if k := &s.ToolSearch.AutoPromoteTopK; *k < 1 || *k > 5 {
		clamped := min(max(*k, 1), 5)
		v.warnf("tool_search.auto_promote_top_k", "%d is outside 1..5; clamping to %d", *k, clamped)
		*k = clamped
	}
	v.database(&s.Database)
	v.pinning(&s.Pinning)
	v.api(&s.API)
	v.guardrails(&s.Guardrails)
	v.personal(&s.PersonalConnections)
	if strings.TrimSpace(s.NATS.URL) == "" {
		v.errorf("nats.url", "must not be empty")
	}
	if s.NATS.Replicas < ReplicasAuto || s.NATS.Replicas > 5 {
		v.errorf("nats.replicas", "must be auto or 1 to 5, got %s", s.NATS.Replicas)
	}
	if _, err := bus.NewNames(s.NATS.Namespace); err != nil {
		v.errorf("nats.namespace", "%v", err)
	}
	if (s.NATS.TLS.CertFile == "") != (s.NATS.TLS.KeyFile == "") {
		v.errorf("nats.tls", "cert_file and key_file go together (a client certificate for mutual TLS): set both or neither")
	}
	if (s.API.TLS.CertFile == "") != (s.API.TLS.KeyFile == "") {
		v.errorf("api.tls", "cert_file and key_file go together: set both to serve HTTPS, neither to serve HTTP")
	}
	if strings.TrimSpace(s.Workspace.Root) == "" {
		v.errorf("workspace.root", "must not be empty")
	}
	if s.StdioPool.MaxSessions < 1 {
		v.errorf("stdio_pool.max_sessions", "must be at least 1, got %d", s.StdioPool.MaxSessions)
	} else if s.StdioPool.MaxSessionsPerUser < 1 || s.StdioPool.MaxSessionsPerUser > s.StdioPool.MaxSessions {
		v.errorf("stdio_pool.max_sessions_per_user", "must be from 1 to stdio_pool.max_sessions (%d), got %d", s.StdioPool.MaxSessions, s.StdioPool.MaxSessionsPerUser)
	}
	v.upstreamLimits(s)
	v.audit(&s.Audit)
	if s.Audit.Database && s.Audit.Enabled && s.Database.Backend == BackendMemory {
		v.errorf("audit.database", "needs database.backend sqlite or postgres (the memory backend has no audit table)")
	}
	switch strings.ToLower(s.Log.Level) {
	case "debug", "info", "warn", "warning", "error":
	default:
		v.errorf("log.level", "must be debug, info, warn or error, got %q", s.Log.Level)
	}
	if s.Log.Format != "text" && s.Log.Format != "json" {
		v.errorf("log.format", "must be text or json, got %q", s.Log.Format)
	}
	v.tracing(&s.Observability.Tracing)
	v.virtualServers(s)
	s.Problems = v.problems
	return v.problems
}

type settingsValidator struct {
	file     string
	problems []Problem
}

func (v *settingsValidator) errorf(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{File: v.file, Field: field, Message: fmt.Sprintf(format, args...), Severity: SeverityError})
}

func (v *settingsValidator) warnf(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{File: v.file, Field: field, Message: fmt.Sprintf(format, args...), Severity: SeverityWarning})
}

func (v *settingsValidator) database(d *DatabaseSettings) {
	switch d.Backend {
	case BackendMemory:
	case BackendSQLite:
		if strings.TrimSpace(d.Path) == "" {
			v.errorf("database.path", "is required when database.backend is sqlite")
		}
	case BackendPostgres:
		if strings.TrimSpace(d.URL) == "" {
			v.errorf("database.url", "is required when database.backend is postgres (or set %s)", EnvDatabaseURL)
		}
	default:
		v.errorf("database.backend", "must be memory, sqlite or postgres, got %q", d.Backend)
	}
}

func (v *settingsValidator) api(a *APISettings) {
	if strings.TrimSpace(a.Listen) == "" {
		v.errorf("api.listen", "must not be empty")
	}
	if a.MaxBodyBytes < 1 {
		v.errorf("api.max_body_bytes", "must be at least 1, got %d", a.MaxBodyBytes)
	}
	for _, f := range []struct {
		name string
		val  int
	}{{"api.mcp.page_size", a.MCP.PageSize}, {"api.mcp.session_idle_seconds", a.MCP.SessionIdleSeconds}, {"api.mcp.max_streams_per_user", a.MCP.MaxStreamsPerUser},
		{"api.mcp.max_sessions_per_user", a.MCP.MaxSessionsPerUser}} {
		if f.val < 1 {
			v.errorf(f.name, "must be at least 1, got %d", f.val)
		}
	}
	if a.Console.SessionSeconds < 60 || a.Console.SessionSeconds > 7*24*3600 {
		v.errorf("api.console.session_seconds", "must be from 60 to 604800, got %d", a.Console.SessionSeconds)
	}
	if a.Console.SignInFailures < 1 || a.Console.SignInFailures > 10000 {
		v.errorf("api.console.sign_in_failures", "must be from 1 to 10000, got %d", a.Console.SignInFailures)
	}
	if a.Console.SignInWindowSeconds < 10 || a.Console.SignInWindowSeconds > 86400 {
		v.errorf("api.console.sign_in_window_seconds", "must be from 10 to 86400, got %d", a.Console.SignInWindowSeconds)
	}
	if a.MCP.SessionBucketMaxBytes < 64<<10 {
		v.errorf("api.mcp.session_bucket_max_bytes", "must be at least 65536, got %d", a.MCP.SessionBucketMaxBytes)
	}
	if a.MCP.CatalogTTLSeconds < 0 {
		v.errorf("api.mcp.catalog_ttl_seconds", "must be 0 or more, got %d", a.MCP.CatalogTTLSeconds)
	}
	for i, o := range a.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.TrimRight(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			v.errorf(fmt.Sprintf("api.allowed_origins[%d]", i), "must be an origin such as http://localhost:3000 (scheme, host and port only)")
		}
	}
	if a.PublicURL != "" {
		u, err := url.Parse(a.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.errorf("api.public_url", "must be an absolute http or https URL without query, fragment or credentials, such as https://mcpbus.example.com")
		}
		a.PublicURL = strings.TrimRight(a.PublicURL, "/")
	}
	if a.OAuthClientIDURL != "" {
		// A client ID metadata document's URL: https with a path.
		u, err := url.Parse(a.OAuthClientIDURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.errorf("api.oauth_client_id_url", "must be an https URL with a path and without query, fragment or credentials, such as https://mcpbus.example.com/oauth/client-metadata.json")
		}
	}
	seen := map[string]int{}
	for i := range a.Keys {
		k := &a.Keys[i]
		f := fmt.Sprintf("api.keys[%d]", i)
		k.SHA256 = strings.ToLower(strings.TrimSpace(k.SHA256))
		if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != 32 {
			v.errorf(f+".sha256", "must be the 64-hex-digit SHA-256 of the key")
		} else if j, dup := seen[k.SHA256]; dup {
			v.errorf(f+".sha256", "repeats api.keys[%d].sha256", j)
		} else {
			seen[k.SHA256] = i
		}
		if strings.TrimSpace(k.UserID) == "" {
			v.errorf(f+".user_id", "must not be empty")
		}
		if k.Role != "admin" && k.Role != "user" {
			v.errorf(f+".role", "must be admin or user, got %q", k.Role)
		}
	}
}

func (v *settingsValidator) guardrails(g *Guardrails) {
	if !g.Enabled {
		return
	}
	use := g.Provider.Use
	switch {
	case use == "allowlist", use == "deerflow.guardrails.builtin:AllowlistProvider":
	case strings.HasPrefix(use, "nats:") && strings.TrimSpace(strings.TrimPrefix(use, "nats:")) != "":
	default:
		v.errorf("guardrails.provider.use", "must be \"allowlist\" or \"nats:<subject>\" when guardrails.enabled is true, got %q", use)
	}
}
