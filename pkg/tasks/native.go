package tasks

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// Native MCP tasks: an upstream tool whose execution.taskSupport is
// "required" (or "optional", when the caller asks for a task) is called
// task-augmented (MCP 2025-11-25 tasks, or the 2026-07-28 tasks extension:
// mcpclient speaks the session's era, and the replies are read in both
// forms here). The upstream's task is a row like
// a toolset's, with driver "native": the poller follows it with the
// upstream's tasks/get, fetches tasks/result once it is terminal, and
// cancels it with tasks/cancel, instead of calling status and cancel
// tools. The row's result is the upstream's CallToolResult object
// ({"content": [...], "structuredContent"?, "isError"?}) as sent, less the
// related-task _meta.

// DriverNative is the driver name of tasks that use the upstream's own MCP
// task API.
const DriverNative = "native"

// DefaultNativeTTL is the lifetime mcpbus asks an upstream to keep a task
// when the caller names none (the upstream may choose another; the one it
// reports is stored).
const DefaultNativeTTL = 24 * time.Hour

// Native task statuses (MCP Task.status).
const (
	NativeWorking       = "working"
	NativeInputRequired = "input_required"
	NativeCompleted     = "completed"
	NativeFailed        = "failed"
	NativeCancelled     = "cancelled"
)

var nativeStatuses = []string{NativeWorking, NativeInputRequired, NativeCompleted, NativeFailed, NativeCancelled}

// NativeData is the driver_data of a native task.
type NativeData struct {
	// Tool is the raw name of the tool that created the task.
	Tool string `json:"tool"`
	// TTLMS is the upstream's ttl in milliseconds (nil: unlimited) and
	// ExpiresAt when it elapses (its createdAt, else the submit's time,
	// plus the ttl); after it the upstream may have deleted the task.
	TTLMS     *int64     `json:"ttl_ms,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// PollIntervalMS is the upstream's last suggested poll interval.
	PollIntervalMS int64 `json:"poll_interval_ms,omitempty"`
	// Traceparent is the submit's W3C trace context (see DriverData).
	Traceparent string `json:"traceparent,omitempty"`
}

// Marshal encodes the driver data for the row.
func (d NativeData) Marshal() json.RawMessage {
	b, _ := json.Marshal(d) // plain fields: cannot fail
	return b
}

// NativeDataOf reads a native row's driver_data (zero when unreadable).
func NativeDataOf(raw json.RawMessage) NativeData {
	var d NativeData
	_ = json.Unmarshal(raw, &d)
	return d
}

// NativeTask is a validated MCP Task object.
type NativeTask struct {
	TaskID        string
	Status        string // one of the Native statuses
	StatusMessage string
	CreatedAt     *time.Time
	TTLMS         *int64
	// PollInterval is pollInterval, capped at MaxPollAfter; 0 when absent.
	PollInterval time.Duration
}

// Terminal reports a completed, failed or cancelled task.
func (t NativeTask) Terminal() bool {
	return t.Status == NativeCompleted || t.Status == NativeFailed || t.Status == NativeCancelled
}

// nativeInvalid is the protocol error of an unreadable task reply.
func nativeInvalid(tool, detail string) *ProtocolError {
	return protocolErrorf("Invalid MCP task from tool '%s': %s", tool, detail)
}

// ParseCreateTask validates a CreateTaskResult: {"task": Task} (MCP
// 2025-11-25), or the Task itself with resultType "task" (the 2026-07-28
// tasks extension).
func ParseCreateTask(tool string, raw json.RawMessage) (NativeTask, error) {
	var r struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
	}
	if json.Unmarshal(raw, &r) == nil && r.ResultType == "task" {
		return ParseNativeTask(tool, "", raw)
	}
	if len(bytes.TrimSpace(r.Task)) == 0 {
		return NativeTask{}, nativeInvalid(tool, "a task-augmented tools/call must return a CreateTaskResult with a task")
	}
	return ParseNativeTask(tool, "", r.Task)
}

// ParseNativeTask validates a Task object (tasks/get, tasks/cancel); a
// non-empty remoteID must match its taskId. Both eras' field names are
// read: ttl and pollInterval (2025-11-25), ttlMs and pollIntervalMs (the
// 2026-07-28 tasks extension).
func ParseNativeTask(tool, remoteID string, raw json.RawMessage) (NativeTask, error) {
	raw = bytes.TrimSpace(raw)
	var t struct {
		TaskID        *string  `json:"taskId"`
		Status        string   `json:"status"`
		StatusMessage string   `json:"statusMessage"`
		CreatedAt     string   `json:"createdAt"`
		TTL           *float64 `json:"ttl"`
		PollInterval  *float64 `json:"pollInterval"`
		TTLMS         *float64 `json:"ttlMs"`
		PollMS        *float64 `json:"pollIntervalMs"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &t) != nil {
		return NativeTask{}, nativeInvalid(tool, "the task must be a JSON object")
	}
	if t.TaskID == nil || *t.TaskID == "" {
		return NativeTask{}, nativeInvalid(tool, "taskId must be a non-empty string")
	}
	if utf8.RuneCountInString(*t.TaskID) > MaxRemoteTaskIDChars {
		return NativeTask{}, protocolErrorf("MCP task remote_task_id must not exceed 255 characters")
	}
	if !slices.Contains(nativeStatuses, t.Status) {
		return NativeTask{}, nativeInvalid(tool, "status must be one of "+strings.Join(nativeStatuses, ", "))
	}
	if remoteID != "" && *t.TaskID != remoteID {
		return NativeTask{}, protocolErrorf("MCP task response task_id does not match the persisted remote task: expected '%s', got '%s'", remoteID, *t.TaskID)
	}
	if t.TTL == nil {
		t.TTL = t.TTLMS
	}
	if t.PollInterval == nil {
		t.PollInterval = t.PollMS
	}
	out := NativeTask{TaskID: *t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage}
	if c, err := time.Parse(time.RFC3339, t.CreatedAt); err == nil {
		out.CreatedAt = &c
	}
	if t.TTL != nil && *t.TTL > 0 {
		ms := int64(*t.TTL)
		out.TTLMS = &ms
	}
	if t.PollInterval != nil && *t.PollInterval > 0 {
		out.PollInterval = min(time.Duration(*t.PollInterval*float64(time.Millisecond)), MaxPollAfter)
	}
	return out, nil
}

// NativeSubmit is what the submit path knows once the upstream created
// the task.
type NativeSubmit struct {
	UserID, ThreadID, RunID, ToolCallID string
	ServerName                          string
	Tool                                string // raw tool name; also the task name
	Traceparent                         string
	Task                                NativeTask
}

// NewNativeTask validates a native submit and returns the row to insert:
// status submitted, the driver data with the upstream's ttl, and the first
// poll after the upstream's pollInterval (else the poll interval). As for
// NewTask, a failure after the upstream created the task must be followed
// by a best-effort tasks/cancel unless it is a conflict.
func NewNativeTask(s NativeSubmit, now time.Time, settings Settings) (*store.Task, error) {
	if err := validateName("server_name", s.ServerName, store.MaxServerNameLen); err != nil {
		return nil, err
	}
	if err := validateName("task_name", s.Tool, store.MaxTaskNameLen); err != nil {
		return nil, err
	}
	d := NativeData{Tool: s.Tool, TTLMS: s.Task.TTLMS, PollIntervalMS: s.Task.PollInterval.Milliseconds(), Traceparent: s.Traceparent}
	if d.TTLMS != nil {
		base := now
		if s.Task.CreatedAt != nil {
			base = *s.Task.CreatedAt
		}
		exp := base.Add(time.Duration(*d.TTLMS) * time.Millisecond).UTC()
		d.ExpiresAt = &exp
	}
	return &store.Task{
		ID: store.NewTaskID(), UserID: s.UserID, ThreadID: s.ThreadID, RunID: s.RunID, ToolCallID: s.ToolCallID,
		ServerName: s.ServerName, DriverName: DriverNative, RemoteTaskID: s.Task.TaskID,
		TaskName: s.Tool, Status: store.TaskStatusSubmitted, NotificationStatus: store.NotificationNone,
		DriverData: d.Marshal(),
		NextPollAt: d.CapAtExpiry(NextPoll(store.TaskStatusSubmitted, s.Task.PollInterval, now, settings)),
	}, nil
}

// CapAtExpiry moves a next poll to the ttl's end when it would come
// later: the last chance to read the task.
func (d NativeData) CapAtExpiry(next *time.Time) *time.Time {
	if next != nil && d.ExpiresAt != nil && next.After(*d.ExpiresAt) {
		at := *d.ExpiresAt
		return &at
	}
	return next
}

// Expired reports whether the upstream's ttl has elapsed at now.
func (d NativeData) Expired(now time.Time) bool {
	return d.ExpiresAt != nil && !now.Before(*d.ExpiresAt)
}

// NativeExpiredError is the failure of a task still unfinished when its
// ttl elapsed.
func NativeExpiredError(ttlMS int64) string {
	return "Remote MCP task did not finish within its ttl of " + (time.Duration(ttlMS) * time.Millisecond).String()
}

// NativeNotFound is the failure of a task the upstream no longer knows
// (JSON-RPC -32602 from tasks/get: expired, or the server restarted).
const NativeNotFound = "Remote MCP task was not found"

// NativePending is the outcome of a non-terminal task: its local status,
// the upstream's poll interval, and for input_required the status message
// as the input_required payload ({"status_message": …}; mcpbus cannot
// answer an upstream's elicitation, so the task waits at the
// input_required interval).
func NativePending(t NativeTask) (Outcome, error) {
	o := Outcome{Status: t.Status, PollAfter: t.PollInterval}
	if t.Status == NativeInputRequired {
		payload, _ := json.Marshal(map[string]string{"status_message": t.StatusMessage})
		in, err := CheckPayload("input_required", payload)
		if err != nil {
			return Outcome{}, err
		}
		o.InputRequired = in
	}
	return o, nil
}

// NativeFinal is the outcome of a terminal task: status is its status and
// result the tasks/result CallToolResult (nil when there is none, as for a
// cancelled task or one whose tasks/result was a JSON-RPC error, whose
// message is rpcErr). A completed task whose result has isError: true is
// failed, as the specification defines failed for tool calls. The result
// is stored under the size caps; its error is the status message, else the
// result's first text block, else rpcErr.
func NativeFinal(tool string, t NativeTask, result json.RawMessage, rpcErr string, s Settings) (Outcome, error) {
	o := Outcome{Status: t.Status, Error: BoundError(t.StatusMessage)}
	if result != nil {
		var r struct {
			Content []json.RawMessage `json:"content"`
			IsError bool              `json:"isError"`
		}
		if json.Unmarshal(result, &r) != nil {
			return Outcome{}, protocolErrorf("MCP task result of tool '%s' is not a CallToolResult", tool)
		}
		result = stripRelatedTask(result)
		res, err := NormalizeResult(result, s.MaxResultBytes, s.ResultPreviewMaxChars)
		if err != nil {
			return Outcome{}, err
		}
		o.Result = res
		if r.IsError {
			o.Status = NativeFailed
			if o.Error == "" || t.Status == NativeCompleted {
				o.Error = ToolErrorFromContent(tool, r.Content).Message
			}
		}
	}
	if o.Status == NativeFailed && o.Error == "" {
		o.Error = BoundError(rpcErr)
	}
	if o.Status == NativeFailed && o.Error == "" {
		o.Error = "MCP task tool '" + tool + "' failed"
	}
	if o.Status == NativeCompleted {
		o.Error = ""
	}
	return o, nil
}

// relatedTaskKey is the _meta key tasks/result adds to the result.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// stripRelatedTask removes the related-task _meta key (the remote task id
// never leaves mcpbus), dropping _meta when nothing else is left.
func stripRelatedTask(raw json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw
	}
	metaRaw, ok := fields["_meta"]
	if !ok {
		return raw
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(metaRaw, &meta) != nil {
		return raw
	}
	if _, ok := meta[relatedTaskKey]; !ok {
		return raw
	}
	delete(meta, relatedTaskKey)
	if len(meta) == 0 {
		delete(fields, "_meta")
	} else {
		fields["_meta"], _ = json.Marshal(meta)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return raw
	}
	return out
}
