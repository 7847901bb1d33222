package tasks

import (
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

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
