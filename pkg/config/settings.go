package config

// Settings is config.yaml. Every key has a default (see DefaultSettings).
type Settings struct {
	// Path is the file it was read from ("" when defaults only).
	Path string `yaml:"-"`
	// Problems holds the findings of the last Validate (warnings such as a
	// clamped value; LoadSettings fails instead when any is an error).
	Problems   []Problem        `yaml:"-"`
	NATS       NATSSettings     `yaml:"nats"`
	Database   DatabaseSettings `yaml:"database"`
	MCPTasks   MCPTasks         `yaml:"mcp_tasks"`
	ToolSearch ToolSearch       `yaml:"tool_search"`
	Guardrails Guardrails       `yaml:"guardrails"`
	Deployment Deployment       `yaml:"deployment"`
	API        APISettings      `yaml:"api"`
	Workspace  Workspace        `yaml:"workspace"`
	StdioPool  StdioPool        `yaml:"stdio_pool"`
	Egress     EgressSettings   `yaml:"egress"`
	Limits     Limits           `yaml:"limits"`
	// PersonalConnections bounds the users' own connections.
	PersonalConnections PersonalConnections `yaml:"personal_connections"`
	Log                 LogSettings         `yaml:"log"`
}

// NATSSettings: where the bus is.
type NATSSettings struct {
	URL             string `yaml:"url"`              // default nats://127.0.0.1:4222
	CredentialsFile string `yaml:"credentials_file"` // default none
	// Replicas is how many servers of a NATS cluster keep each JetStream
	// bucket and stream mcpbus creates (1 to 5; 3 for a three-node
	// cluster, so one node's loss keeps them available). Default 1.
	Replicas int `yaml:"replicas"`
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
	Listen       string   `yaml:"listen"`         // default 127.0.0.1:8001
	Keys         []APIKey `yaml:"keys"`           // none: loopback only, everyone is admin "default"
	MaxBodyBytes int64    `yaml:"max_body_bytes"` // default 1 MiB
}

// APIKey is one key, stored as the hex SHA-256 of the bearer value.
type APIKey struct {
	SHA256 string `yaml:"sha256"`
	UserID string `yaml:"user_id"`
	Role   string `yaml:"role"` // admin or user
}

// Workspace is where thread workspaces for stdio servers live.
type Workspace struct {
	Root string `yaml:"root"` // default .mcpbus/workspace
}

// StdioPool bounds the stdio session pool.
type StdioPool struct {
	MaxSessions int `yaml:"max_sessions"` // default 256
}

// LogSettings configure logging.
type LogSettings struct {
	Level  string `yaml:"level"`  // info
	Format string `yaml:"format"` // text or json (default text)
}
