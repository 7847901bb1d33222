package tasks

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Texts of the submit path (reference §4.3).
const (
	// SubmitDescriptionSuffix is appended (with the toolset name) to the
	// submit tool's description: fmt.Sprintf(SubmitDescriptionSuffix, name).
	SubmitDescriptionSuffix = "\n\nSubmitted as durable background task '%s'; returns a DeerFlow task ID immediately and status polling is handled automatically."
	// RuntimeNotInitialized is the error of a submit with no task runtime.
	RuntimeNotInitialized = "The MCP task runtime is not initialized. Run this tool through the Gateway with mcp_tasks.enabled=true and a SQL database backend."
	// SubmittedMessage is the message of the handle returned to the caller.
	SubmittedMessage = "Task is running in the background."
)

// Submit is what the submit path knows once the remote submit answered.
type Submit struct {
	UserID, ThreadID, RunID, ToolCallID string
	ServerName                          string // runtime server name, 1..128 characters
	Toolset                             DriverData
	TaskName                            string // the toolset name, 1..255 characters
	Reply                               SubmitReply
}

// validateName returns "<field> must not be empty" or "<field> must not
// exceed N characters".
func validateName(field, v string, maxChars int) error {
	if strings.TrimSpace(v) == "" {
		return &NameError{Message: field + " must not be empty"}
	}
	if utf8.RuneCountInString(v) > maxChars {
		return &NameError{Message: fmt.Sprintf("%s must not exceed %d characters", field, maxChars)}
	}
	return nil
}

// NewTask validates a submit and returns the row to insert: status
// submitted, the three raw tool names as driver data, and the first poll at
// now + (poll_after_seconds or the poll interval). A failure after a
// successful remote submit (this, or InsertTask failing with anything but
// store.ErrConflict) must be followed by a best-effort remote cancel; a
// conflict (the remote id is already tracked for this user and server) must
// not.
func NewTask(s Submit, now time.Time, settings Settings) (*store.Task, error) {
	if err := validateName("server_name", s.ServerName, store.MaxServerNameLen); err != nil {
		return nil, err
	}
	if err := validateName("task_name", s.TaskName, store.MaxTaskNameLen); err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(s.Reply.RemoteTaskID) > MaxRemoteTaskIDChars {
		return nil, protocolErrorf("MCP task remote_task_id must not exceed 255 characters")
	}
	return &store.Task{
		ID: store.NewTaskID(), UserID: s.UserID, ThreadID: s.ThreadID, RunID: s.RunID, ToolCallID: s.ToolCallID,
		ServerName: s.ServerName, DriverName: DriverStructured, RemoteTaskID: s.Reply.RemoteTaskID,
		TaskName: s.TaskName, Status: store.TaskStatusSubmitted, NotificationStatus: store.NotificationNone,
		DriverData: s.Toolset.Marshal(),
		NextPollAt: NextPoll(store.TaskStatusSubmitted, s.Reply.PollAfter, now, settings),
	}, nil
}

// DuplicateError is the message of a remote id already tracked for the
// user on the server (store.ErrConflict on insert).
func DuplicateError(remoteTaskID, server string) string {
	return fmt.Sprintf("Remote MCP task '%s' is already tracked for server '%s' by this user", remoteTaskID, server)
}

// Handle is what the caller of a submit gets (and its text content).
func Handle(t *store.Task) bus.TaskHandle {
	return bus.TaskHandle{TaskID: t.ID, TaskName: t.TaskName, Status: "submitted", Message: SubmittedMessage}
}
