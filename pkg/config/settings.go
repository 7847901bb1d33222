package config

// Settings is config.yaml. Every key has a default (see DefaultSettings).
type Settings struct {
	// Path is the file it was read from ("" when defaults only).
	Path string `yaml:"-"`
	// Problems holds the findings of the last Validate (warnings such as a
	// clamped value; LoadSettings fails instead when any is an error).
	Problems []Problem `yaml:"-"`
	// CredentialsKeySet reports a credentials key in the environment the
	// settings were loaded with (the key itself stays in Env).
	CredentialsKeySet bool              `yaml:"-"`
	NATS              NATSSettings      `yaml:"nats"`
	Database          DatabaseSettings  `yaml:"database"`
	MCPTasks          MCPTasks          `yaml:"mcp_tasks"`
	ToolSearch        ToolSearch        `yaml:"tool_search"`
	Discovery         DiscoverySettings `yaml:"discovery"`
	// Pinning is the tool pinning defaults (settings_pinning.go).
	Pinning    PinningSettings `yaml:"pinning"`
	Guardrails Guardrails      `yaml:"guardrails"`
	Deployment Deployment      `yaml:"deployment"`
	API        APISettings     `yaml:"api"`
	// PersonalConnections bounds the users' own MCP server definitions and
	// what their stdio servers may run (settings_personal.go).
	PersonalConnections PersonalConnections `yaml:"personal_connections"`
	Workspace           Workspace           `yaml:"workspace"`
	StdioPool           StdioPool           `yaml:"stdio_pool"`
	Egress              EgressSettings      `yaml:"egress"`
	Limits              Limits              `yaml:"limits"`
	Log                 LogSettings         `yaml:"log"`
	Shutdown            Shutdown            `yaml:"shutdown"`
	// Observability configures tracing (settings_observability.go).
	Observability ObservabilitySettings `yaml:"observability"`
	Audit         AuditSettings         `yaml:"audit"`
	// VirtualServers are named subsets of the catalog with their own
	// endpoints, overrides and quotas (settings_virtual.go).
	VirtualServers []VirtualServer `yaml:"virtual_servers"`
}

// NATSSettings: where the bus is.
type NATSSettings struct {
	URL string `yaml:"url"` // default nats://127.0.0.1:4222
	// URLSet is true when config.yaml sets url (the operator commands use
	// no default URL).
	URLSet          bool   `yaml:"-"`
	CredentialsFile string `yaml:"credentials_file"` // default none
	// TokenFile is a file holding the token the NATS server asks for
	// (`mcpbus dev` sets it to .mcpbus/nats.token). Default none.
	TokenFile string `yaml:"token_file"`
	// Replicas is how many servers of a NATS cluster keep each JetStream
	// bucket and stream mcpbus creates: auto (the default: the cluster's
	// size, at most 3, so one node's loss keeps them available) or 1 to 5.
	// Every service reconciles the existing ones to it at start.
	Replicas Replicas `yaml:"replicas"`
	// Namespace prefixes every subject, KV bucket, stream and micro service
	// name of the deployment (see bus.Names), so several deployments share
	// one NATS account without seeing each other: 1 to 32 letters, digits,
	// '-' or '_'. Default "" (the plain names: mcpbus.tools.call, MCPBUS).
	Namespace string `yaml:"namespace"`
	// BindIdentity makes the services serve the per-user subjects
	// (mcpbus.u.<user>.tools.call, …) where the caller is the user of the
	// subject, so NATS permissions bind an agent worker to one user (see
	// bus.Names.User and deploy/nats/accounts.conf). Default false.
	BindIdentity bool `yaml:"bind_identity"`
	// Identities bind users of the per-user subjects to the virtual
	// servers they may use (settings_virtual.go). Default none: a bound
	// user may use the whole catalog.
	Identities []NATSIdentity `yaml:"identities"`
	// TLS secures the connections to NATS: the server is verified against
	// ca_file, and cert_file/key_file answer a server that asks for a
	// client certificate (mutual TLS). Default none (plain TCP, or what the
	// URL's tls:// scheme asks for).
	TLS NATSTLS `yaml:"tls"`
}

// NATSTLS are the PEM files of the services' NATS connections: CAFile
// verifies the server, CertFile/KeyFile are the client's own certificate
// for mutual TLS.
type NATSTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// APITLS are the PEM files of the api's own HTTPS.
type APITLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Database backends.
const (
	BackendMemory   = "memory"
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// DatabaseSettings: memory (default), sqlite (path) or postgres (url).
type DatabaseSettings struct {
	Backend string `yaml:"backend"`
	URL     string `yaml:"url"`  // postgres
	Path    string `yaml:"path"` // sqlite; default .mcpbus/mcpbus.db
	// BackendSet reports a backend named in config.yaml (not the default):
	// `mcpbus dev` replaces only the default memory backend with SQLite.
	BackendSet bool `yaml:"-"`
	// AutoMigrate: a service (and `mcpbus dev`) applies the pending
	// migrations at start. Default true. Off, the services only check the
	// schema version (a release's migrations then run once, from `mcpbus
	// migrate`: a Kubernetes Job or an init step; docs/operations.md).
	AutoMigrate bool `yaml:"auto_migrate"`
}

// MCPTasks is the durable-task runtime (read at startup).
type MCPTasks struct {
	Enabled                          bool `yaml:"enabled"`
	PollIntervalSeconds              int  `yaml:"poll_interval_seconds"`                // 5, 1..300
	LeaseSeconds                     int  `yaml:"lease_seconds"`                        // 120, 5..3600
	MaxConcurrentPolls               int  `yaml:"max_concurrent_polls"`                 // 8, 1..64
	MaxPollBackoffSeconds            int  `yaml:"max_poll_backoff_seconds"`             // 300, 1..3600
	InputRequiredPollIntervalSeconds int  `yaml:"input_required_poll_interval_seconds"` // 60, 5..3600
	TrackingDegradedAfterErrors      int  `yaml:"tracking_degraded_after_errors"`       // 3, 1..100
	MaxResultBytes                   int  `yaml:"max_result_bytes"`                     // 65536, 1024..10485760
	ResultPreviewMaxChars            int  `yaml:"result_preview_max_chars"`             // 2000, 64..100000
}

// ToolSearch defers MCP tool schemas behind tool_search.
type ToolSearch struct {
	Enabled         bool `yaml:"enabled"`            // false
	AutoPromoteTopK int  `yaml:"auto_promote_top_k"` // 3, clamped to 1..5
}

// DiscoverySettings: how discovery retries a server that failed.
type DiscoverySettings struct {
	// RetryInitialSeconds is how long a failed server stays failed before
	// a lookup retries it; each consecutive failure doubles it. Default 5.
	RetryInitialSeconds int `yaml:"retry_initial_seconds"`
	// RetryMaxSeconds caps the wait between retries. Default 300.
	RetryMaxSeconds int `yaml:"retry_max_seconds"`
}

// Guardrails gate tool calls before anything reaches an upstream.
type Guardrails struct {
	Enabled    bool              `yaml:"enabled"`     // false
	FailClosed bool              `yaml:"fail_closed"` // true
	Provider   GuardrailProvider `yaml:"provider"`
}

// GuardrailProvider: "allowlist" (built in) or "nats:<subject>" (external).
type GuardrailProvider struct {
	Use    string         `yaml:"use"`
	Config map[string]any `yaml:"config"`
}

// Deployment describes the deployment shape.
type Deployment struct {
	MultiInstance bool `yaml:"multi_instance"`
}

// APISettings configure the REST API.
type APISettings struct {
	Listen string `yaml:"listen"` // default 127.0.0.1:8001
	// TLS: with cert_file and key_file the api serves HTTPS itself (else
	// plain HTTP, for loopback or behind a TLS-terminating Ingress).
	TLS          APITLS   `yaml:"tls"`
	Keys         []APIKey `yaml:"keys"`           // none: loopback only, everyone is admin "default"
	MaxBodyBytes int64    `yaml:"max_body_bytes"` // default 1 MiB
	// ReadTimeoutSeconds bounds reading a whole request, body included
	// (1..3600, default 30): a body that never finishes is cut off.
	ReadTimeoutSeconds int `yaml:"read_timeout_seconds"`
	// ReadHeaderTimeoutSeconds bounds reading the request headers (1..600,
	// default 10).
	ReadHeaderTimeoutSeconds int `yaml:"read_header_timeout_seconds"`
	// IdleTimeoutSeconds closes an idle keep-alive connection (1..3600,
	// default 120). There is no global write timeout: streaming responses
	// (the /mcp GET stream) write for as long as they live, and tool calls
	// are bounded by the bus request timeout instead.
	IdleTimeoutSeconds int `yaml:"idle_timeout_seconds"`
	// MaxHeaderBytes caps the request line and headers (4096..1048576,
	// default 65536).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// AllowedOrigins are browser origins ("http://localhost:3000") accepted
	// besides the API's own when no API keys are configured. Default none.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// PublicURL is the API's base URL as a browser reaches it
	// ("https://mcpbus.example.com"): connecting an account on an
	// OAuth-protected MCP server sends the person's browser back to
	// <PublicURL>/oauth/callback, and the client ID metadata document is
	// served under it. Default none (connecting accounts is refused).
	PublicURL string `yaml:"public_url"`
	// OAuthClientIDURL is the client ID (an https URL) mcpbus uses with
	// authorization servers that support client ID metadata documents,
	// for an operator who hosts the document at a stable URL of their own
	// (a copy of <PublicURL>/oauth/client-metadata.json, which then names
	// this URL). Default <PublicURL>/oauth/client-metadata.json.
	OAuthClientIDURL string `yaml:"oauth_client_id_url"`
	// MCP configures the aggregated MCP endpoint (/mcp, /sse, /messages).
	MCP MCPEndpoint `yaml:"mcp"`
	// Console configures the web console at /ui/.
	Console ConsoleSettings `yaml:"console"`
}

// ClientIDURL is api.oauth_client_id_url, or by default the client ID
// metadata document the api serves ("" without a public URL).
func (a APISettings) ClientIDURL() string {
	if a.OAuthClientIDURL != "" {
		return a.OAuthClientIDURL
	}
	if a.PublicURL == "" {
		return ""
	}
	return a.PublicURL + "/oauth/client-metadata.json"
}

// ConsoleSettings configure the web console served at /ui/.
type ConsoleSettings struct {
	// SessionSeconds is how long a console sign-in lasts (60..604800,
	// default 28800): the session cookie and its entry in the shared
	// session bucket expire together.
	SessionSeconds int `yaml:"session_seconds"`
	// SignInFailures is how many failed sign-ins one client address may
	// make in SignInWindowSeconds (1..10000, default 10); the next
	// attempt, with any key, is refused (429, Retry-After) until the
	// window ends. Counted in the shared session bucket: across replicas.
	SignInFailures int `yaml:"sign_in_failures"`
	// SignInWindowSeconds is that window (10..86400, default 900).
	SignInWindowSeconds int `yaml:"sign_in_window_seconds"`
}

// MCPEndpoint configures the api's aggregated MCP endpoint.
type MCPEndpoint struct {
	PageSize           int `yaml:"page_size"`            // tools per tools/list page; default 100
	SessionIdleSeconds int `yaml:"session_idle_seconds"` // a session expires this long after its last use; default 1800
	MaxStreamsPerUser  int `yaml:"max_streams_per_user"` // open GET /mcp and /sse streams per user and replica; default 8
	// MaxSessionsPerUser caps a user's sessions across replicas: a new one
	// past it retires that user's oldest. Default 64.
	MaxSessionsPerUser int `yaml:"max_sessions_per_user"`
	// SessionBucketMaxBytes bounds the session bucket (every api replica
	// mirrors it in memory); a session is at most 16 KiB. Default 256 MiB.
	SessionBucketMaxBytes int64 `yaml:"session_bucket_max_bytes"`
	// CatalogTTLSeconds is the ttlMs caching hint (in seconds) of a
	// 2026-07-28 tools/list and server/discover: how long a client may
	// keep the catalog without listing again; 0 tells it not to keep it.
	// Default 60.
	CatalogTTLSeconds int `yaml:"catalog_ttl_seconds"`
}

// APIKey is one key, stored as the hex SHA-256 of the bearer value.
type APIKey struct {
	SHA256 string `yaml:"sha256"`
	UserID string `yaml:"user_id"`
	Role   string `yaml:"role"` // admin or user
	// VirtualServers, when set, are the only virtual servers the key may
	// use: the default endpoints (/mcp, REST without ?virtual=) refuse it.
	VirtualServers []string `yaml:"virtual_servers"`
}

// Workspace is where thread workspaces for stdio servers live.
type Workspace struct {
	Root string `yaml:"root"` // default .mcpbus/workspace
}

// StdioPool bounds the stdio session pool.
type StdioPool struct {
	MaxSessions int `yaml:"max_sessions"` // default 256
	// MaxSessionsPerUser bounds one user's share of the pool: a user's
	// new session past it retires that user's least recently used one,
	// never another user's. Default 32, 1..max_sessions.
	MaxSessionsPerUser int `yaml:"max_sessions_per_user"`
}

// Shutdown paces a service's two-phase stop: on SIGTERM (or the end of
// `mcpbus dev`) it stops accepting at once, then in-flight work has up to
// DrainSeconds to finish before pools and connections close.
type Shutdown struct {
	// DrainSeconds bounds the wait for in-flight requests, calls and
	// lease releases of each service (1..3600, default 30).
	DrainSeconds int `yaml:"drain_seconds"`
}

// LogSettings configure logging.
type LogSettings struct {
	Level  string `yaml:"level"`  // info
	Format string `yaml:"format"` // text or json (default text)
}
