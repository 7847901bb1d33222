package bus

import "time"

// ToolsSearchRequest is the body of mcpbus.tools.search. Query takes one of
// three forms: "select:a,b" (exactly those names), "+req rest" (names
// containing req, ranked by matches of rest) or a case-insensitive regular
// expression (an invalid one is matched literally).
type ToolsSearchRequest struct {
	Query    string   `json:"query"`
	UserID   string   `json:"user_id,omitempty"`
	ThreadID string   `json:"thread_id,omitempty"`
	Promoted []string `json:"promoted,omitempty"`
	// VirtualServer searches the named virtual server's tools only
	// (docs/virtual-servers.md); empty: the whole catalog.
	VirtualServer string `json:"virtual_server,omitempty"`
}

// ToolsSearchReply is the reply of mcpbus.tools.search: the matching tools
// (full schemas), the promotion state after merging the deferred matches
// into the request's, and Message when nothing matched.
type ToolsSearchReply struct {
	CatalogHash string   `json:"catalog_hash"`
	Tools       []Tool   `json:"tools"`
	Promoted    []string `json:"promoted"`
	Message     string   `json:"message,omitempty"`
}

// Server states reported by mcpbus.internal.servers.
const (
	ServerStateOK       = "ok"
	ServerStateFailed   = "failed"
	ServerStateDisabled = "disabled"
	// ServerStatePending means enabled but not discovered in this generation
	// yet (or its discovery is in flight).
	ServerStatePending = "pending"
	// ServerStateInvalid means the server's entry in the config file has
	// an error (LastError says which field and why); no service runs it.
	ServerStateInvalid = "invalid"
	// ServerStateNeedsAuth means a server whose accounts people connect
	// cannot be discovered until one is connected (or connected again):
	// it waits for a user, it has not failed.
	ServerStateNeedsAuth = "needs_auth"
)

// ServersRequest is the body of mcpbus.internal.servers.
type ServersRequest struct {
	// NoRefresh reports the state as it is instead of first running a
	// catalog lookup (which discovers what is missing).
	NoRefresh bool `json:"no_refresh,omitempty"`
}

// ServerStatus is one configured server as the answering replica sees it.
type ServerStatus struct {
	Name      string `json:"name"`
	Enabled   bool   `json:"enabled"`
	Transport string `json:"transport"`
	State     string `json:"state"`
	// LastError is the last discovery error (never a secret value).
	LastError string `json:"last_error,omitempty"`
	// Stderr is the end of what a stdio server wrote to stderr before its
	// last discovery failed, redacted (its env values and URL credentials
	// are "***"). Upstream-controlled text: only admins see it (GET
	// /api/mcp/servers), never failed_servers or tool errors.
	Stderr string `json:"stderr,omitempty"`
	// ToolCount is how many of the server's tools agents see in the
	// published catalog (what it listed when no catalog is published).
	ToolCount int `json:"tool_count"`
	// PromptCount, ResourceCount and ResourceTemplateCount are what the
	// server listed (docs/federation.md §2).
	PromptCount           int `json:"prompt_count"`
	ResourceCount         int `json:"resource_count"`
	ResourceTemplateCount int `json:"resource_template_count"`
	// Era ("legacy" or "modern") and ProtocolVersion are how the last
	// discovery spoke to an ok server (probed at each discovery).
	Era             string     `json:"era,omitempty"`
	ProtocolVersion string     `json:"protocol_version,omitempty"`
	DiscoveredAt    *time.Time `json:"discovered_at,omitempty"`
	Generation      int64      `json:"generation"`
	// ConsecutiveFailures counts the failed discoveries of a failed
	// server's current configuration in this generation.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
	// NextRetryAt is when a lookup retries a failed server (capped
	// exponential backoff: discovery.retry_initial_seconds doubling up to
	// discovery.retry_max_seconds).
	NextRetryAt *time.Time `json:"next_retry_at,omitempty"`
	// RestartRequired marks a task-enabled server held back because its
	// definition changed after startup (LastError names the fields): it
	// serves again after a restart or when the change is reverted.
	RestartRequired bool `json:"restart_required,omitempty"`
}

// NameClash is a visible tool name produced by two servers: Winner (first
// in config order) keeps it, Loser's tool is not listed.
type NameClash struct {
	// Kind is what clashed: "prompt", "resource" or "resource_template"
	// (docs/federation.md); absent for a tool.
	Kind   string `json:"kind,omitempty"`
	Name   string `json:"name"`
	Winner string `json:"winner"`
	Loser  string `json:"loser"`
}

// ServersReply is the reply of mcpbus.internal.servers.
type ServersReply struct {
	Generation int64          `json:"generation"`
	Servers    []ServerStatus `json:"servers"`
	Clashes    []NameClash    `json:"clashes"`
	// Error is why the catalog cannot be published right now (every server
	// failed, a task toolset mismatch, configuration drift), if so.
	Error *Error `json:"error,omitempty"`
}

// CatalogEvent is the body published on mcpbus.events.catalog whenever a
// replica publishes a catalog that differs from its previous one, and after
// a cache reset once for each server whose background rediscovery ended
// (Server set): clients learn of each server as soon as it is ready.
type CatalogEvent struct {
	Generation  int64  `json:"generation"`
	CatalogHash string `json:"catalog_hash"`
	// Revision is a hash of everything agents see (names, schemas,
	// descriptions, routing); it changes whenever the catalog does.
	Revision string `json:"revision"`
	// Server is the server whose rediscovery in Generation ended (its new
	// tools, or its failure, are in the catalog), if the event says so.
	Server string `json:"server,omitempty"`
	// Lists are the lists that changed (ListTools, ListPrompts,
	// ListResources) when the event follows a server's own list_changed;
	// absent: any of them may have.
	Lists []string `json:"lists,omitempty"`
	// UserID, when set, is the only user whose catalog changed (Server is
	// one of that user's personal connections); Revision is then that
	// user's catalog's.
	UserID string `json:"user_id,omitempty"`
}

// The lists of a CatalogEvent and a RediscoverRequest.
const (
	ListTools     = "tools"
	ListPrompts   = "prompts"
	ListResources = "resources"
)

// RediscoverRequest is published on Names.InternalRediscover (no reply) by
// the toolcall replica whose connection to Server received an upstream's
// notifications/{tools,prompts,resources}/list_changed: every discovery
// replica rediscovers that server alone. UserID is set for a personal
// connection (Server is its runtime name) and is its owner.
type RediscoverRequest struct {
	Server string   `json:"server"`
	UserID string   `json:"user_id,omitempty"`
	Lists  []string `json:"lists,omitempty"`
}
