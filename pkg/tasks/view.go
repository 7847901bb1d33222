package tasks

import (
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// A task's status in each view, in one place. The stored statuses
// (store.TaskStatus*: submitted, working, input_required, completed,
// failed, cancelled) are what REST and NATS show as they are (Item,
// Detail). MCP tasks on /mcp show them through MCPStatus and
// MCPStatusMessage, in both the 2025-11-25 task protocol and the
// 2026-07-28 extension; the extension also reserves failed for a JSON-RPC
// error (ExtensionError).

// MCPStatus is a stored status as MCP tasks show it: submitted is working
// (MCP tasks begin there); every other status is as stored.
func MCPStatus(status string) string {
	if status == store.TaskStatusSubmitted {
		return store.TaskStatusWorking
	}
	return status
}

// MCPStatusMessage is an MCP task's statusMessage: what the status alone
// does not say ("" when nothing).
func MCPStatusMessage(d bus.TaskItem) string {
	switch {
	case d.Error != nil && *d.Error != "":
		return *d.Error
	case d.Status == store.TaskStatusCancelled:
		return "The task was cancelled."
	case d.CancelRequested && !store.IsTerminalStatus(d.Status):
		return "Cancellation requested; mcpbus is cancelling the task on its server."
	case d.TrackingDegraded:
		return "mcpbus cannot reach the task's server right now and keeps trying."
	case d.Status == store.TaskStatusInputRequired:
		return "The task needs input."
	}
	return ""
}

// ExtensionError reports how the 2026-07-28 extension shows a failed
// task, which it reserves for JSON-RPC errors: a native task that failed
// without a result (the upstream's JSON-RPC error, or mcpbus lost it: not
// found upstream, its ttl ended) is failed with an internal error carrying
// the returned message (ok true); any other failed task is a tool that
// failed (a toolset's job, a native task whose result has isError) and
// shows as completed with an isError result (ok false).
func ExtensionError(d bus.TaskDetail) (msg string, ok bool) {
	if d.Status != store.TaskStatusFailed || d.ResultFormat != bus.ResultFormatCallToolResult || len(d.Result) != 0 || d.ResultTruncated {
		return "", false
	}
	if d.Error != nil && *d.Error != "" {
		return *d.Error, true
	}
	return "The task failed.", true
}

// Item is the list view of a row. It never shows the remote task id, the
// server name or the driver data.
func Item(t *store.Task, threshold int) bus.TaskItem {
	return bus.TaskItem{
		TaskID: t.ID, TaskName: t.TaskName, Status: t.Status,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Error:            nullable(BoundView(t.Error)),
		TrackingDegraded: TrackingDegraded(t, threshold),
		CancelRequested:  t.CancelRequestedAt != nil,
	}
}

// Detail is the detail view of a row.
func Detail(t *store.Task, threshold int) bus.TaskDetail {
	format := ""
	if t.DriverName == DriverNative {
		format = bus.ResultFormatCallToolResult
	}
	return bus.TaskDetail{
		ResultFormat:             format,
		TaskItem:                 Item(t, threshold),
		LastPolledAt:             t.LastPolledAt,
		LastPollError:            nullable(BoundView(t.LastPollError)),
		LastCancelError:          nullable(BoundView(t.LastCancelError)),
		CancelAttemptCount:       t.CancelAttemptCount,
		NotificationStatus:       t.NotificationStatus,
		NotificationError:        nullable(BoundView(t.NotificationError)),
		NotificationAttemptCount: t.NotificationAttemptCount,
		Result:                   t.Result,
		ResultPreview:            nullable(t.ResultPreview),
		ResultTruncated:          t.ResultTruncated,
		ResultArtifact:           t.ResultArtifact,
		InputRequired:            t.InputRequired,
	}
}
