// Package audit is mcpbus's audit log: one record per tool call (written by
// toolcall at the end of the call) and per config change made through the
// API (written by api), published to the JetStream stream MCPBUS_AUDIT
// (bus.Names.AuditStream) with a retention limit, and read back by
// `mcpbus audit tail` and GET /api/mcp/audit.
//
// A record never holds a call's arguments, headers or result, nor a config
// value: only who, what, where and how it ended. The one exception is the
// operator's opt-in (audit.capture_arguments), which keeps the arguments
// masked (Capture) and capped in size.
package audit

import (
	"encoding/json"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Kinds of record.
const (
	KindCall   = "call"
	KindConfig = "config"
	// KindReplyDropped is a request a service dropped because its reply
	// subject was not one its caller may receive on (bus.DroppedReply,
	// published by the service's microsvc guard).
	KindReplyDropped = bus.KindReplyDropped
)

// KindsText names the kinds for an error or a flag's help.
const KindsText = "call, config or " + KindReplyDropped

// KnownKind reports whether kind selects records: one of the kinds, or ""
// for all.
func KnownKind(kind string) bool {
	switch kind {
	case "", KindCall, KindConfig, KindReplyDropped:
		return true
	}
	return false
}

// Record is one audit record.
type Record struct {
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	// RequestID is the Mcpbus-Request-Id the request carried, TraceID the
	// W3C trace id of its span when tracing is on.
	RequestID string `json:"request_id,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
	User      string `json:"user,omitempty"`

	// Tool calls.
	Thread    string `json:"thread,omitempty"`
	Tool      string `json:"tool,omitempty"`
	Server    string `json:"server,omitempty"`
	Transport string `json:"transport,omitempty"`
	// Outcome is "ok", "tool_error" (a result with isError) or the error
	// code of a failed call.
	Outcome     string  `json:"outcome,omitempty"`
	DurationMS  float64 `json:"duration_ms,omitempty"`
	ResultBytes int     `json:"result_bytes,omitempty"`
	// Arguments are the masked, capped arguments, only with
	// audit.capture_arguments; ArgumentsTruncated says the cap cut them
	// (Arguments is then a JSON string of the first bytes).
	Arguments          json.RawMessage `json:"arguments,omitempty"`
	ArgumentsTruncated bool            `json:"arguments_truncated,omitempty"`
	// VirtualServer is the virtual server the call came through, Policy
	// the decision on it: "allowed", or the policy that refused it
	// (api.keys[].virtual_servers, nats.identities, virtual_servers, a
	// quota such as quotas[0]).
	VirtualServer string `json:"virtual_server,omitempty"`
	Policy        string `json:"policy,omitempty"`

	// Config changes: Action is the API's (put_config, patch_config),
	// Changes what it changed.
	Action  string   `json:"action,omitempty"`
	Changes []Change `json:"changes,omitempty"`

	// Dropped requests: the service that dropped it, the request's
	// subject and its refused reply subject.
	Service string `json:"service,omitempty"`
	Subject string `json:"subject,omitempty"`
	Reply   string `json:"reply,omitempty"`
}

// Change is one server's change in a config write: the server, what
// happened to it (added, removed, changed, enabled, disabled) and, for a
// change, the keys that differ ("url", "headers.Authorization",
// "env.API_KEY", …). Values are never recorded, secret or not.
type Change struct {
	Server string   `json:"server"`
	Op     string   `json:"op"`
	Keys   []string `json:"keys,omitempty"`
}
