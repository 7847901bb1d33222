package bus

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// The durable-task contract on the bus: the background tool call the task
// poller makes through the toolcall service (mcpbus.internal.call), the task
// API served by the task poller (mcpbus.tasks.list, .get and .cancel) and the
// task notification events (mcpbus.events.tasks.<thread_id>).

// InternalCallRequest is the body of mcpbus.internal.call: one call of a
// server's raw tool name with background credentials only (static headers,
// OAuth, or the persisted owner's user_auth credential). It never carries
// request secrets or headers_from_context values, and the responder must not
// look for them.
//
// It is a Call (its fields at the top level of the body) of which only
// these are read: Tool, the server's raw tool name (no prefix);
// Arguments; UserID, the task's owner, which selects user_auth and
// personal connections; ThreadID, which selects the stdio session and
// workspace; TimeoutMS, which bounds the upstream call (the server's
// tool_call_timeout, at most the poller's lease; 0 lets the responder
// choose). A request carrying context.secrets is refused.
type InternalCallRequest struct {
	Call
	// Server is the runtime server name stored with the task (a deployment
	// server or the owner's personal connection).
	Server string `json:"server"`
	// Method selects what is sent upstream (see the Method constants):
	// "" is a tools/call of Tool with Arguments; the task methods send
	// TaskID to the server's own task API (MCP 2025-11-25 tasks) through
	// the same chain, session and credentials, and reply with Result or
	// RPCError. Tool names the tool that created the task (interceptors
	// and logs see it); Arguments are not sent.
	Method string `json:"method,omitempty"`
	// TaskID is the upstream's task id of a task method.
	TaskID string `json:"task_id,omitempty"`
}

// Internal call methods of the upstream's MCP task API.
const (
	MethodTasksGet    = "tasks/get"
	MethodTasksResult = "tasks/result"
	MethodTasksCancel = "tasks/cancel"
)

// RPCError is a JSON-RPC error an upstream answered a task method with
// (for example -32602 for a task it does not know).
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// RPCCodeInvalidParams is JSON-RPC's invalid params code: for tasks/get,
// tasks/result and tasks/cancel an unknown (or expired) task, and for
// tasks/cancel also a task already terminal.
const RPCCodeInvalidParams = -32602

// InternalCallReply is the MCP result of an internal call, unchanged:
// content blocks as MCP defines them, structuredContent and isError. A call
// that could not be made at all (transport, timeout, credentials) replies
// with an error code instead; see PermanentCallError for the one error that
// ends a task.
type InternalCallReply struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structured_content,omitempty"`
	IsError           bool              `json:"is_error"`
	// Meta is the result's _meta, as sent; nil when absent.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Result is a task method's JSON-RPC result as the upstream sent it (a
	// Task for tasks/get and tasks/cancel, a CallToolResult for
	// tasks/result); RPCError its JSON-RPC error instead. Content is then
	// empty.
	Result   json.RawMessage `json:"result,omitempty"`
	RPCError *RPCError       `json:"rpc_error,omitempty"`
	// InputRequired is a handed-over call's multi-round-trip answer
	// (bridge.go).
	InputRequired *InputRequired `json:"input_required,omitempty"`
}

// DetailPermanent marks an internal-call error that will never succeed on
// retry: the persisted task handle can no longer be resolved (for example a
// personal connection edited, disabled or deleted since the submit). The
// task poller fails such a task permanently, even when a cancel was
// requested. Every other error is retried with backoff.
const DetailPermanent = "permanent"

// PermanentCallError builds the internal-call error for an unresolvable task
// handle: code config_error with Details {"permanent": true}.
func PermanentCallError(message string) *Error {
	return &Error{Code: CodeConfigError, Message: message, Details: map[string]any{DetailPermanent: true}}
}

// IsPermanentCallError reports whether err is a PermanentCallError, also
// after it crossed the bus.
func IsPermanentCallError(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	v, _ := e.Details[DetailPermanent].(bool)
	return v
}

// MCPTasksExtension is the identifier of MCP 2026-07-28's tasks extension
// (SEP-2663), which mcpbus speaks on both sides.
const MCPTasksExtension = "io.modelcontextprotocol/tasks"

// TaskListRequest is the body of mcpbus.tasks.list, .get and .cancel. UserID
// and ThreadID are required (thread ids match ^[A-Za-z0-9_-]{1,64}$);
// TaskID is required by get and cancel; Limit (list only) is 1..100, 0 means
// 50. Before (list only) continues a list after the caller's task with that
// id (keyset pagination in list order); an id that is not the caller's
// lists nothing. Another user's or another thread's task is not_found.
type TaskListRequest struct {
	UserID string `json:"user_id"`
	// ThreadID names the thread; "" in mcpbus.tasks.list lists every
	// thread of the user (each item then carries its thread_id).
	ThreadID string `json:"thread_id"`
	TaskID   string `json:"task_id,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	Before   string `json:"before,omitempty"`
}

// TaskItem is one task in a list (reference §4.10 item fields). Error is at
// most 500 characters.
type TaskItem struct {
	TaskID           string    `json:"task_id"`
	TaskName         string    `json:"task_name"`
	Status           string    `json:"status"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
	Error            *string   `json:"error"`
	TrackingDegraded bool      `json:"tracking_degraded"`
	CancelRequested  bool      `json:"cancel_requested"`
	// ThreadID is set only in a list over every thread of the user
	// (TaskListRequest.ThreadID ""); the thread routes leave it out.
	ThreadID string `json:"thread_id,omitempty"`
}

// TaskDetail is one task with the detail fields (reply of mcpbus.tasks.get
// and .cancel). The error texts are at most 500 characters. The remote task
// id, the server name and the driver data are never part of it.
type TaskDetail struct {
	TaskItem
	LastPolledAt             *time.Time      `json:"last_polled_at"`
	LastPollError            *string         `json:"last_poll_error"`
	LastCancelError          *string         `json:"last_cancel_error"`
	CancelAttemptCount       int             `json:"cancel_attempt_count"`
	NotificationStatus       string          `json:"notification_status"`
	NotificationError        *string         `json:"notification_error"`
	NotificationAttemptCount int             `json:"notification_attempt_count"`
	Result                   json.RawMessage `json:"result"`
	ResultPreview            *string         `json:"result_preview"`
	ResultTruncated          bool            `json:"result_truncated"`
	ResultArtifact           json.RawMessage `json:"result_artifact"`
	InputRequired            json.RawMessage `json:"input_required"`
	// ResultFormat says what Result holds: ResultFormatCallToolResult for
	// a task of an upstream tool with native MCP task support (the
	// upstream's CallToolResult); absent for a task toolset's result value.
	ResultFormat string `json:"result_format,omitempty"`
}

// ResultFormatCallToolResult marks a result that is an MCP CallToolResult
// ({"content": [...], "structuredContent"?, "isError"?}).
const ResultFormatCallToolResult = "mcp_call_tool_result"

// TaskListReply is the reply of mcpbus.tasks.list: the caller's tasks in the
// thread, newest first (created_at DESC, id DESC).
type TaskListReply struct {
	Tasks []TaskItem `json:"tasks"`
}

// TaskEvent is the notification event of a task (reference §4.7): produced
// when the task needs input, reaches a terminal state, or while its tracking
// is degraded. Its fingerprint (SHA-256 of the JSON with sorted keys) decides
// whether a change is a new event.
type TaskEvent struct {
	TaskID           string          `json:"task_id"`
	TaskName         string          `json:"task_name"`
	Status           string          `json:"status"`
	Result           json.RawMessage `json:"result"`
	ResultPreview    *string         `json:"result_preview"`
	ResultTruncated  bool            `json:"result_truncated"`
	ResultArtifact   json.RawMessage `json:"result_artifact"`
	Error            *string         `json:"error"`
	InputRequired    json.RawMessage `json:"input_required"`
	TrackingDegraded bool            `json:"tracking_degraded"`
	// LastPollError is null unless tracking is degraded.
	LastPollError *string `json:"last_poll_error"`
}

// TaskEventMessage is the body published to mcpbus.events.tasks.<thread_id>
// with the header Nats-Msg-Id: mcp-task:<task_id>:<event_version>, so that
// JetStream drops a republished event: the event plus its routing fields.
type TaskEventMessage struct {
	TaskEvent
	ThreadID     string `json:"thread_id"`
	UserID       string `json:"user_id"`
	EventVersion int    `json:"event_version"`
}

// TaskEventMsgID is the JetStream message id of one event version.
func TaskEventMsgID(taskID string, eventVersion int) string {
	return "mcp-task:" + taskID + ":" + strconv.Itoa(eventVersion)
}
