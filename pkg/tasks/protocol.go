package tasks

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Remote statuses of the task protocol.
const (
	RemoteRunning       = "running"
	RemoteInputRequired = "input_required"
	RemoteCompleted     = "completed"
	RemoteFailed        = "failed"
	RemoteCancelled     = "cancelled"
)

// ErrorCodeTaskNotFound in a status reply fails the task permanently.
const ErrorCodeTaskNotFound = "task_not_found"

// Limits of the protocol (reference §4.2, §4.4, §4.5).
const (
	MaxRemoteTaskIDChars = 255
	MaxErrorChars        = 4000
	MaxViewErrorChars    = 500
	MaxToolErrorSnippet  = 500
	MaxPayloadBytes      = 65536
	MaxPollAfter         = 24 * time.Hour
)

var remoteStatuses = []string{RemoteRunning, RemoteInputRequired, RemoteCompleted, RemoteFailed, RemoteCancelled}

// StatusReply is a validated status or cancel reply. Absent and null fields
// are zero.
type StatusReply struct {
	TaskID         string
	Status         string // remote status
	Result         json.RawMessage
	ResultArtifact json.RawMessage
	Error          string
	ErrorCode      string
	InputRequired  json.RawMessage
	// PollAfter is poll_after_seconds, capped at MaxPollAfter; 0 when absent.
	PollAfter time.Duration
}

// SubmitReply is a validated submit reply.
type SubmitReply struct {
	RemoteTaskID string
	PollAfter    time.Duration // 0 when absent
}

// object decodes structuredContent into its fields, or returns the protocol
// error for a missing or non-object document.
func object(tool string, sc json.RawMessage) (map[string]json.RawMessage, error) {
	sc = bytes.TrimSpace(sc)
	if len(sc) == 0 || bytes.Equal(sc, []byte("null")) {
		return nil, protocolErrorf("MCP task tool '%s' must return structuredContent; text content is not parsed", tool)
	}
	var fields map[string]json.RawMessage
	if sc[0] != '{' || json.Unmarshal(sc, &fields) != nil {
		return nil, invalid(tool, "structuredContent must be a JSON object")
	}
	for k, v := range fields {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(fields, k) // null is absent
		}
	}
	return fields, nil
}

// stringField returns a string field ("" when absent).
func stringField(tool string, fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", invalid(tool, name+" must be a string")
	}
	return s, nil
}

// taskIDField checks task_id: a string of 1..255 characters.
func taskIDField(tool string, fields map[string]json.RawMessage) (string, error) {
	id, err := stringField(tool, fields, "task_id")
	if err != nil || id == "" {
		return "", invalid(tool, "task_id must be a non-empty string")
	}
	if utf8.RuneCountInString(id) > MaxRemoteTaskIDChars {
		return "", invalid(tool, "task_id must not exceed 255 characters")
	}
	return id, nil
}

// pollAfterField checks poll_after_seconds: a positive finite number,
// capped at 24 hours.
func pollAfterField(tool string, fields map[string]json.RawMessage) (time.Duration, error) {
	raw, ok := fields["poll_after_seconds"]
	if !ok {
		return 0, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, invalid(tool, "poll_after_seconds must be a positive finite number")
	}
	if f >= MaxPollAfter.Seconds() {
		return MaxPollAfter, nil
	}
	return max(time.Duration(f*float64(time.Second)), time.Nanosecond), nil
}

// ParseSubmit validates a submit reply: {"task_id": non-empty string,
// "status": "running"}; extra keys are ignored. A remote id over 255
// characters is refused.
func ParseSubmit(tool string, sc json.RawMessage) (SubmitReply, error) {
	fields, err := object(tool, sc)
	if err != nil {
		return SubmitReply{}, err
	}
	id, err := stringField(tool, fields, "task_id")
	if err != nil || id == "" {
		return SubmitReply{}, invalid(tool, "task_id must be a non-empty string")
	}
	status, err := stringField(tool, fields, "status")
	if err != nil || status != RemoteRunning {
		return SubmitReply{}, invalid(tool, `submit status must be "running"`)
	}
	if utf8.RuneCountInString(id) > MaxRemoteTaskIDChars {
		return SubmitReply{}, protocolErrorf("MCP task remote_task_id must not exceed 255 characters")
	}
	after, err := pollAfterField(tool, fields)
	if err != nil {
		return SubmitReply{}, err
	}
	return SubmitReply{RemoteTaskID: id, PollAfter: after}, nil
}

// ParseStatus validates a status reply for the persisted remote id. A reply
// with error_code task_not_found comes back with status failed and the
// error "Remote MCP task was not found" unless it carries one.
func ParseStatus(tool, remoteTaskID string, sc json.RawMessage) (StatusReply, error) {
	r, err := parseReply(tool, remoteTaskID, sc)
	if err != nil {
		return StatusReply{}, err
	}
	if r.ErrorCode == ErrorCodeTaskNotFound {
		r.Status = RemoteFailed
		if r.Error == "" {
			r.Error = "Remote MCP task was not found"
		}
	}
	return r, nil
}

// ParseCancel validates a cancel reply: a matching task_id and the actual
// terminal status (cancelled, completed or failed). A non-terminal status is
// an error (the cancel is retried).
func ParseCancel(tool, remoteTaskID string, sc json.RawMessage) (StatusReply, error) {
	r, err := parseReply(tool, remoteTaskID, sc)
	if err != nil {
		return StatusReply{}, err
	}
	if r.ErrorCode == ErrorCodeTaskNotFound {
		r.Status = RemoteFailed
		if r.Error == "" {
			r.Error = "Remote MCP task was not found"
		}
	}
	if r.Status != RemoteCancelled && r.Status != RemoteCompleted && r.Status != RemoteFailed {
		return StatusReply{}, protocolErrorf("MCP task cancellation must return a terminal status")
	}
	return r, nil
}

func parseReply(tool, remoteTaskID string, sc json.RawMessage) (StatusReply, error) {
	fields, err := object(tool, sc)
	if err != nil {
		return StatusReply{}, err
	}
	var r StatusReply
	if r.TaskID, err = taskIDField(tool, fields); err != nil {
		return StatusReply{}, err
	}
	status, err := stringField(tool, fields, "status")
	if err != nil || !slices.Contains(remoteStatuses, status) {
		return StatusReply{}, invalid(tool, "status must be one of "+strings.Join(remoteStatuses, ", "))
	}
	r.Status = status
	if r.TaskID != remoteTaskID {
		return StatusReply{}, protocolErrorf("MCP task response task_id does not match the persisted remote task: expected '%s', got '%s'", remoteTaskID, r.TaskID)
	}
	r.Result = fields["result"]
	if raw, ok := fields["result_artifact"]; ok {
		var a struct {
			URI      *string `json:"uri"`
			MimeType *string `json:"mime_type"`
		}
		if raw[0] != '{' || json.Unmarshal(raw, &a) != nil || a.URI == nil || *a.URI == "" || a.MimeType == nil || *a.MimeType == "" {
			return StatusReply{}, invalid(tool, "result_artifact must be an object with non-empty uri and mime_type")
		}
		r.ResultArtifact = raw
	}
	if r.Error, err = stringField(tool, fields, "error"); err != nil {
		return StatusReply{}, err
	}
	if r.ErrorCode, err = stringField(tool, fields, "error_code"); err != nil {
		return StatusReply{}, err
	}
	if raw, ok := fields["input_required"]; ok {
		if bytes.TrimSpace(raw)[0] != '{' {
			return StatusReply{}, invalid(tool, "input_required must be an object")
		}
		r.InputRequired = raw
	}
	if r.Status == RemoteInputRequired && r.InputRequired == nil {
		return StatusReply{}, protocolErrorf("Invalid structuredContent: input_required status requires input_required")
	}
	if r.PollAfter, err = pollAfterField(tool, fields); err != nil {
		return StatusReply{}, err
	}
	return r, nil
}

// LocalStatus maps a remote status to the task's status: running becomes
// working; the others keep their names.
func LocalStatus(remote string) string {
	if remote == RemoteRunning {
		return "working"
	}
	return remote
}
