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
	// (ToolsCallRequest.Digest) to be refused if the tool changed since.
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

// CallContext carries request-scoped values; Secrets are never logged or stored.
type CallContext struct {
	Secrets map[string]string `json:"secrets,omitempty"`
}

// ToolsCallRequest is the body of mcpbus.tools.call.
type ToolsCallRequest struct {
	Tool string `json:"tool"`
	// Digest is the tool's digest as the caller listed it (Tool.Digest):
	// a call against a definition that changed since is refused with
	// CodeToolChanged instead of running the new one. Empty: not checked.
	Digest     string          `json:"digest,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	UserID     string          `json:"user_id,omitempty"`
	ThreadID   string          `json:"thread_id,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Promoted   []string        `json:"promoted,omitempty"`
	Context    *CallContext    `json:"context,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	// Config is the run configuration of the DeerFlow run shape; only its
	// metadata is read, to refuse a legacy auth_token (RejectAuthToken).
	Config    *CallConfig `json:"config,omitempty"`
	TimeoutMS int64       `json:"timeout_ms,omitempty"`
	// CallID names the call for mcpbus.tools.cancel (on a per-user
	// subject, also mcpbus.u.<user>.tools.cancel; see progress.go);
	// empty: the call cannot be cancelled.
	CallID string `json:"call_id,omitempty"`
	// ProgressInbox is where the upstream's notifications/progress params
	// are published (see progress.go): mcpbus.progress.<token>, or on a
	// per-user subject _INBOX_<user>.<token>; empty: no progress is asked
	// for.
	ProgressInbox string `json:"progress_inbox,omitempty"`
	// LogLevel (one of MCP's log levels, debug … emergency) asks for the
	// upstream's notifications/message of this call at that level and
	// above, published to ProgressInbox (progress.go); empty: none.
	LogLevel string `json:"log_level,omitempty"`
	// Task asks for a durable task: an upstream tool whose
	// execution.taskSupport is "optional" is then called task-augmented
	// and tracked in mcp_tasks (a "required" one always is; a task
	// toolset's submit always is). nil: a plain call where the tool allows
	// one.
	Task *CallTask `json:"task,omitempty"`
	// Taskless says the caller cannot take a task (a 2026-07-28 client
	// that did not declare the tasks extension): a tool that runs only as
	// a task (execution.taskSupport "required") is refused with
	// CodeClientCapabilityMissing (the tasks extension) instead of made
	// one. Other tools are unaffected.
	Taskless bool `json:"taskless,omitempty"`
	// ClientCapabilities is what the caller's MCP client declared that an
	// upstream may act on (bridge.go); nil: nothing declared.
	ClientCapabilities *ClientCapabilities `json:"client_capabilities,omitempty"`
	// Input is the retry of a call answered with InputRequired
	// (bridge.go): forwarded to the upstream with this call.
	Input *CallInput `json:"input,omitempty"`
	// AskInbox is where a legacy upstream's server-to-client requests
	// made during the call go (Names.AskInboxPrefix; bridge.go); empty:
	// they are refused.
	AskInbox string `json:"ask_inbox,omitempty"`
	// VirtualServer calls through the named virtual server: Tool (and
	// Promoted) are names as that set shows them, and a tool outside it
	// is forbidden (docs/virtual-servers.md). Empty: the whole catalog.
	VirtualServer string `json:"virtual_server,omitempty"`
}

// CallTask is the task a caller asks for (MCP's params.task).
type CallTask struct {
	// TTLMS is the requested lifetime of the upstream task in
	// milliseconds (MCP task.ttl); 0 lets mcpbus choose.
	TTLMS int64 `json:"ttl_ms,omitempty"`
}

// CallConfig is the config object of a run (config.metadata).
type CallConfig struct {
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// RejectAuthToken refuses the legacy credential carriers of a tool call:
// metadata.auth_token, metadata.config.metadata.auth_token and
// config.metadata.auth_token. It is the one check the api (REST) and
// toolcall (NATS) both make; the error is invalid_request and never echoes
// the value.
func (r *ToolsCallRequest) RejectAuthToken() error {
	metas := []json.RawMessage{r.Metadata}
	if r.Config != nil {
		metas = append(metas, r.Config.Metadata)
	}
	for _, meta := range metas {
		if len(meta) == 0 || string(meta) == "null" {
			continue
		}
		var m struct {
			AuthToken json.RawMessage `json:"auth_token"`
			Config    *struct {
				Metadata struct {
					AuthToken json.RawMessage `json:"auth_token"`
				} `json:"metadata"`
			} `json:"config"`
		}
		if err := json.Unmarshal(meta, &m); err != nil {
			return Errorf(CodeInvalidRequest, "metadata must be a JSON object")
		}
		if m.AuthToken != nil || (m.Config != nil && m.Config.Metadata.AuthToken != nil) {
			return Errorf(CodeInvalidRequest, "Run metadata key 'auth_token' is not allowed; pass request-scoped credentials via context.secrets instead.")
		}
	}
	return nil
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
