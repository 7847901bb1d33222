package bus

import (
	"bytes"
	"encoding/json"
)

// CallContext carries request-scoped values; Secrets are never logged or stored.
type CallContext struct {
	Secrets map[string]string `json:"secrets,omitempty"`
}

// MinSessionDigest is the shortest Call.SessionDigest checked: 24 hex
// digits, 96 bits, too many for an upstream to find a changed definition
// that keeps them.
const MinSessionDigest = 24

// Call is one tool call, the one value every entry point builds (REST,
// NATS, /mcp in both eras, /sse, stdio, the task poller's calls, a
// hand-over to the replica owning a stdio session) and toolcall carries
// through guardrails, interceptors, credentials and the pool to the
// upstream client. Its JSON form is the body of mcpbus.tools.call and
// what a hand-over forwards. Arguments stay raw bytes end to end: only
// CheckArguments looks at them (their first byte).
type Call struct {
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

	// SessionDigest is the start (at least MinSessionDigest hex digits)
	// of the digest the caller's MCP session listed the tool with, which
	// the api remembers for clients that send no Digest: a tool whose
	// digest no longer starts with it is refused with CodeToolChanged,
	// checked against the catalog the call resolves with. Ignored when
	// Digest is set.
	SessionDigest string `json:"session_digest,omitempty"`
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
func (r *Call) RejectAuthToken() error {
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

// ToolsCallRequest is the former name of Call.
//
// Deprecated: use Call.
type ToolsCallRequest = Call

// CheckArguments is the one check of a call's arguments: absent, null or a
// JSON object (raw is valid JSON: it was decoded as part of its request).
// The error is invalid_request naming the field, never its value.
func CheckArguments(raw json.RawMessage) error {
	a := bytes.TrimSpace(raw)
	if len(a) == 0 || string(a) == "null" || a[0] == '{' {
		return nil
	}
	return Errorf(CodeInvalidRequest, "arguments must be a JSON object")
}
