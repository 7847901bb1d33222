package bus

import (
	"encoding/json"
	"time"
)

// Routing is a tool's routing metadata.
type Routing struct {
	Mode     string   `json:"mode"`
	Priority int      `json:"priority"`
	Keywords []string `json:"keywords"`
}

// Tool is one entry of the catalog as agents see it.
type Tool struct {
	Name         string          `json:"name"`
	Server       string          `json:"server"`
	OriginalName string          `json:"original_name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Routing      *Routing        `json:"routing,omitempty"`
	Deferred     bool            `json:"deferred"`
	TaskToolset  string          `json:"task_toolset,omitempty"`
	// Personal is set for a tool of one of the caller's personal
	// connections: discovery read its server from the personal-connection
	// store (Server is then its runtime name). It is never inferred from a
	// name: a deployment server named like a runtime name is a deployment
	// server.
	Personal bool `json:"personal,omitempty"`
	// Connection is the caller's account state on the tool's server when
	// its accounts people connect (per user) and the caller's is not
	// connected: needs_auth (or error). Empty: connected, or nothing to
	// connect. On /mcp it is _meta["mcpbus/connection"].state.
	Connection string `json:"connection,omitempty"`
	// Execution is the upstream tool's MCP execution object as it listed
	// it ({"taskSupport": "required"|"optional"|"forbidden"}), nil when
	// absent. A tool with native task support becomes a durable task.
	Execution json.RawMessage `json:"execution,omitempty"`
	// ServerEra is the MCP era discovery spoke to the tool's server in
	// ("legacy", "modern"; empty when unknown): toolcall's first
	// connection to the server starts in that era instead of probing
	// (mcpclient.EraCache.Seed).
	ServerEra string `json:"server_era,omitempty"`
	// Meta is the upstream tool's _meta, its ui.resourceUri visible
	// (docs/federation.md, MCP Apps); nil when absent.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Digest is the hex SHA-256 of the canonical JSON of the definition
	// served (name, description, input and output schema, annotations as
	// the upstream listed them; pkg/pinning). A call may carry it back
	// (Call.Digest) to be refused if the tool changed since.
	Digest string `json:"digest,omitempty"`
	// TimeoutMS is the tool's server's tool_call_timeout in milliseconds
	// (0: none): an MCP client's tools/call waits this long, plus a
	// margin, for toolcall's reply (mcpserver), so a call that no replica
	// answers ends at its own timeout.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// MCP execution.taskSupport values (2025-11-25).
const (
	TaskSupportRequired  = "required"
	TaskSupportOptional  = "optional"
	TaskSupportForbidden = "forbidden"
)

// TaskSupport is the tool's execution.taskSupport, "forbidden" when absent
// or unreadable (the specification's default).
func (t Tool) TaskSupport() string {
	if len(t.Execution) == 0 {
		return TaskSupportForbidden
	}
	var e struct {
		TaskSupport string `json:"taskSupport"`
	}
	if json.Unmarshal(t.Execution, &e) != nil {
		return TaskSupportForbidden
	}
	switch e.TaskSupport {
	case TaskSupportRequired, TaskSupportOptional:
		return e.TaskSupport
	}
	return TaskSupportForbidden
}

// FailedServer names a server whose discovery failed in this pass.
type FailedServer struct {
	Server string `json:"server"`
	Error  string `json:"error"`
	// Code is the error's code when it says more than "failed":
	// auth_required is a server that waits for an account to be
	// connected (state needs_auth), not a failing one.
	Code Code `json:"code,omitempty"`
}

// ToolsListRequest is the body of mcpbus.tools.list.
type ToolsListRequest struct {
	UserID            string   `json:"user_id,omitempty"`
	ThreadID          string   `json:"thread_id,omitempty"`
	LatestUserMessage string   `json:"latest_user_message,omitempty"`
	Promoted          []string `json:"promoted,omitempty"`
	// PageSize asks for the catalog a page at a time: at most this many
	// tools per reply (fewer when a page would pass half the bus's
	// max_payload). Zero, without a cursor: the whole catalog in one
	// reply, refused when it would not fit in one message
	// (docs/nats-catalog.md).
	PageSize int `json:"page_size,omitempty"`
	// Cursor asks for the page after the one whose NextCursor it is.
	Cursor string `json:"cursor,omitempty"`
	// VirtualServer lists the named virtual server's view of the catalog
	// (docs/virtual-servers.md); empty: the whole catalog. A caller bound
	// to virtual servers must name one of them.
	VirtualServer string `json:"virtual_server,omitempty"`
	// Tool looks up one tool by its visible name (mcpbus.internal.catalog,
	// toolcall's resolution of a call): the reply's Tools holds that tool
	// alone, or nothing when the catalog has none of that name; no page,
	// no cursor, whatever the catalog's size.
	Tool string `json:"tool,omitempty"`
}

// Paged reports a request for one page of the catalog.
func (r ToolsListRequest) Paged() bool { return r.PageSize > 0 || r.Cursor != "" }

// ToolsListReply is the reply of mcpbus.tools.list: the whole catalog, or
// one page of it (then Tools and Bind are the page's, and RoutingHints and
// DeferredSection are sent with the first page only).
type ToolsListReply struct {
	Generation  int64  `json:"generation"`
	CatalogHash string `json:"catalog_hash"`
	// Revision is a hash of everything the catalog holds (every tool's
	// fields, routing hints): the same revision is the same catalog.
	Revision        string         `json:"revision,omitempty"`
	Tools           []Tool         `json:"tools"`
	Bind            []string       `json:"bind"`
	Promoted        []string       `json:"promoted"`
	RoutingHints    string         `json:"routing_hints"`
	DeferredSection string         `json:"deferred_section"`
	FailedServers   []FailedServer `json:"failed_servers"`
	// NextCursor asks for the next page; empty on the last page and on an
	// unpaged reply.
	NextCursor string `json:"next_cursor,omitempty"`
}

// TaskHandle is what a task-toolset submit returns to the caller.
type TaskHandle struct {
	TaskID   string `json:"task_id"`
	TaskName string `json:"task_name"`
	Status   string `json:"status"`
	Message  string `json:"message"`
}

// ToolsCallReply is the reply of mcpbus.tools.call. Content holds MCP content
// blocks exactly as MCP defines them.
type ToolsCallReply struct {
	Tool              string            `json:"tool"`
	Server            string            `json:"server"`
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structured_content,omitempty"`
	IsError           bool              `json:"is_error"`
	// Meta is the upstream result's _meta, as sent; nil when absent.
	Meta json.RawMessage `json:"meta,omitempty"`
	Task *TaskHandle     `json:"task,omitempty"`
	// InputRequired is set when a 2026-07-28 upstream asked for more input
	// instead of answering (bridge.go); Content is then empty.
	InputRequired *InputRequired `json:"input_required,omitempty"`
}

// CacheResetRequest is the body of mcpbus.cache.reset.
type CacheResetRequest struct {
	Reason string `json:"reason,omitempty"`
}

// CacheResetReply is the reply of mcpbus.cache.reset, sent only once the
// new generation is durably in the KV bucket (otherwise the reset fails
// with unavailable and changes nothing).
type CacheResetReply struct {
	Success    bool   `json:"success"`
	Message    string `json:"message"`
	Scope      string `json:"scope"`
	Generation int64  `json:"generation"`
	// Acknowledged says, per service, how many of its live replicas have
	// applied Generation by the time of the reply.
	Acknowledged map[string]ReplicaAcks `json:"acknowledged"`
}

// ReplicaAcks counts one service's live replicas and how many of them
// have acknowledged a generation.
type ReplicaAcks struct {
	Replicas     int `json:"replicas"`
	Acknowledged int `json:"acknowledged"`
}

// HealthReply answers a service's health subject.
type HealthReply struct {
	Service string `json:"service"`
	Status  string `json:"status"`
	Ready   bool   `json:"ready"`
}

// TokenRequest asks the tokens service (mcpbus.internal.token) for the
// Authorization header of a server's OAuth connection. Owner is empty for a
// deployment server and the user id for a personal connection.
type TokenRequest struct {
	Server string `json:"server"`
	Owner  string `json:"owner,omitempty"`
	// UserID is the caller: a server whose accounts people connect
	// (oauth.grant_type authorization_code, per user) answers with the
	// caller's token, or auth_required with a link.
	UserID string `json:"user_id,omitempty"`
	// ConfigFingerprint is the caller's view of the server's configuration;
	// the tokens service refuses with config_error when its own differs, so a
	// token is never minted for a configuration the caller does not have.
	ConfigFingerprint string `json:"config_fingerprint,omitempty"`
	// ForceRefresh asks for a new token (the upstream refused the last one).
	ForceRefresh bool `json:"force_refresh,omitempty"`
	// RejectedValueSHA256 is, with ForceRefresh, the hex SHA-256 of the
	// header value the upstream refused (never the value itself). When the
	// tokens service already holds a different value, it returns that one
	// instead of refreshing again, so many callers refused at once cause a
	// single refresh. Empty: refresh whatever is current.
	RejectedValueSHA256 string `json:"rejected_value_sha256,omitempty"`
}

// TokenReply is the header to send and when it stops being valid. The
// value is a secret: never log it.
type TokenReply struct {
	Header    string    `json:"header"`
	Value     string    `json:"value"`
	ExpiresAt time.Time `json:"expires_at"`
	// RefreshSkewSeconds is the server's oauth.refresh_skew_seconds (never
	// negative): callers cache the value until ExpiresAt minus this many
	// seconds, the moment the tokens service itself would refresh.
	RefreshSkewSeconds int `json:"refresh_skew_seconds,omitempty"`
}
