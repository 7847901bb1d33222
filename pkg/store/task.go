package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Task statuses (the status column).
const (
	TaskStatusSubmitted     = "submitted"
	TaskStatusWorking       = "working"
	TaskStatusInputRequired = "input_required"
	TaskStatusCompleted     = "completed"
	TaskStatusFailed        = "failed"
	TaskStatusCancelled     = "cancelled"
)

// Notification outbox statuses (the notification_status column).
const (
	NotificationNone       = "none"
	NotificationPending    = "pending"
	NotificationClaimed    = "claimed"
	NotificationDispatched = "dispatched"
	NotificationRetry      = "retry"
	NotificationDelivered  = "delivered"
	NotificationDeadLetter = "dead_letter"
)

// Column limits enforced by the schema.
const (
	MaxServerNameLen   = 128 // characters
	MaxRemoteTaskIDLen = 255 // characters
	MaxTaskNameLen     = 255 // characters
)

// TaskIDPrefix starts every local task id; 32 lowercase hex digits follow.
const TaskIDPrefix = "mcp-task-"

var (
	taskStatuses = []string{
		TaskStatusSubmitted, TaskStatusWorking, TaskStatusInputRequired,
		TaskStatusCompleted, TaskStatusFailed, TaskStatusCancelled,
	}
	notificationStatuses = []string{
		NotificationNone, NotificationPending, NotificationClaimed, NotificationDispatched,
		NotificationRetry, NotificationDelivered, NotificationDeadLetter,
	}
	// dueNotificationStatuses have an event still to deliver.
	dueNotificationStatuses = []string{NotificationPending, NotificationClaimed, NotificationRetry}
)

// TaskStatuses returns every task status, in lifecycle order (the one list
// the SQL stores and the OpenAPI document derive theirs from).
func TaskStatuses() []string { return slices.Clone(taskStatuses) }

// NonTerminalTaskStatuses returns the statuses that still change.
func NonTerminalTaskStatuses() []string {
	return slices.DeleteFunc(TaskStatuses(), IsTerminalStatus)
}

// DueNotificationStatuses returns the notification statuses whose event is
// still to deliver (the ones ClaimDueNotifications considers).
func DueNotificationStatuses() []string { return slices.Clone(dueNotificationStatuses) }

// IsTerminalStatus reports whether a task in status s never changes again
// (completed, failed or cancelled).
func IsTerminalStatus(s string) bool {
	return s == TaskStatusCompleted || s == TaskStatusFailed || s == TaskStatusCancelled
}

// NewTaskID returns a fresh local task id: "mcp-task-" and 32 hex digits.
func NewTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return TaskIDPrefix + hex.EncodeToString(b[:])
}

// Task is one row of mcp_tasks: a durable remote MCP task with its poll and
// cancel lease and its notification outbox (reference §4.1).
//
// RemoteTaskID, DriverData and ServerName are internal: no API returns them.
type Task struct {
	ID string // TaskIDPrefix + 32 hex; InsertTask generates it when empty
	// Namespace is the nats.namespace of the deployment that submitted the
	// task ("" without one): only that deployment's pollers claim it.
	Namespace    string
	UserID       string
	ThreadID     string
	RunID        string // optional
	ToolCallID   string // optional
	ServerName   string // 1..128 characters
	DriverName   string
	RemoteTaskID string // 1..255 characters; unique per (UserID, ServerName)
	TaskName     string // 1..255 characters
	Status       string // one of the TaskStatus constants; InsertTask defaults it to submitted

	Result          json.RawMessage
	ResultPreview   string
	ResultTruncated bool
	ResultArtifact  json.RawMessage
	Error           string
	InputRequired   json.RawMessage
	DriverData      json.RawMessage // the raw submit/status/cancel tool names

	// Notification outbox.
	NotificationStatus         string // one of the Notification constants; defaults to none
	EventFingerprint           string
	EventVersion               int
	NotifiedVersion            int
	DispatchVersion            int
	DispatchAttempt            int
	DispatchEvent              json.RawMessage
	NotificationError          string
	NotificationAttemptCount   int
	NextNotificationAt         *time.Time
	NotificationLeaseOwner     string
	NotificationLeaseExpiresAt *time.Time

	// Polling.
	NextPollAt                *time.Time
	LastPolledAt              *time.Time
	LastPollError             string
	PollAttemptCount          int
	ConsecutivePollErrorCount int

	// The lease shared by poll and cancel claims.
	LeaseOwner     string
	LeaseExpiresAt *time.Time

	// Cancellation.
	CancelRequestedAt  *time.Time
	CancelAttemptCount int
	NextCancelAt       *time.Time
	LastCancelError    string

	CompletedAt *time.Time
	CreatedAt   time.Time // InsertTask uses now when zero
	UpdatedAt   time.Time // set by the store on every write
}

// ApplyDefaults fills the fields InsertTask defaults: a new ID, status
// submitted and notification status none.
func (t *Task) ApplyDefaults() {
	if t.ID == "" {
		t.ID = NewTaskID()
	}
	if t.Status == "" {
		t.Status = TaskStatusSubmitted
	}
	if t.NotificationStatus == "" {
		t.NotificationStatus = NotificationNone
	}
}

// Validate checks what the schema would reject, so that every backend fails
// the same way (with ErrInvalid) before touching the database.
func (t *Task) Validate() error {
	var problems []string
	required := func(name, v string) {
		if v == "" {
			problems = append(problems, name+" must not be empty")
		}
	}
	maxLen := func(name, v string, n int) {
		if utf8.RuneCountInString(v) > n {
			problems = append(problems, fmt.Sprintf("%s must not exceed %d characters", name, n))
		}
	}
	required("id", t.ID)
	required("user_id", t.UserID)
	required("thread_id", t.ThreadID)
	required("server_name", t.ServerName)
	required("driver_name", t.DriverName)
	required("remote_task_id", t.RemoteTaskID)
	required("task_name", t.TaskName)
	maxLen("server_name", t.ServerName, MaxServerNameLen)
	maxLen("remote_task_id", t.RemoteTaskID, MaxRemoteTaskIDLen)
	maxLen("task_name", t.TaskName, MaxTaskNameLen)
	if !slices.Contains(taskStatuses, t.Status) {
		problems = append(problems, fmt.Sprintf("status %q is not a task status", t.Status))
	}
	if !slices.Contains(notificationStatuses, t.NotificationStatus) {
		problems = append(problems, fmt.Sprintf("notification_status %q is not a notification status", t.NotificationStatus))
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{
		{"result", t.Result}, {"result_artifact", t.ResultArtifact}, {"input_required", t.InputRequired},
		{"driver_data", t.DriverData}, {"dispatch_event", t.DispatchEvent},
	} {
		if len(f.raw) > 0 && !json.Valid(f.raw) {
			problems = append(problems, f.name+" is not valid JSON")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: task: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}
