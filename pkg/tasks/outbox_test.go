package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func outboxRow() *store.Task {
	row := &store.Task{ID: "mcp-task-1", ThreadID: "th", UserID: "u", TaskName: "n", Status: "completed", NotificationStatus: store.NotificationNone}
	tasks.RecordEvent(row, 3, t0)
	return row
}

func TestOutboxDeliveryAndRetries(t *testing.T) {
	s := settings
	row := outboxRow()
	if !tasks.PrepareDispatch(row, 3) || row.NotificationStatus != store.NotificationClaimed || row.DispatchVersion != 1 || row.DispatchEvent == nil {
		t.Fatalf("prepare: %+v", row)
	}
	msg, err := tasks.EventMessage(row)
	if err != nil || msg.EventVersion != 1 || msg.ThreadID != "th" || msg.Status != "completed" {
		t.Fatalf("message %+v %v", msg, err)
	}
	if id := bus.TaskEventMsgID(row.ID, row.DispatchVersion); id != "mcp-task:mcp-task-1:1" {
		t.Fatalf("msg id %s", id)
	}
	for n := 1; n <= tasks.MaxNotificationAttempts; n++ {
		if tasks.ShouldDeadLetter(row) {
			t.Fatalf("dead-lettered after %d attempts", n-1)
		}
		tasks.DeliveryFailed(row, "no stream", t0, s)
		want := t0.Add(tasks.Backoff(n-1, s.PollInterval, s.MaxPollBackoff))
		if row.NotificationStatus != store.NotificationRetry || row.NotificationAttemptCount != n || !row.NextNotificationAt.Equal(want) {
			t.Fatalf("after failure %d: %+v", n, row)
		}
		// A retry of the same version keeps its frozen event.
		if tasks.PrepareDispatch(row, 3) {
			t.Fatal("a retry re-froze an unchanged version")
		}
	}
	if !tasks.ShouldDeadLetter(row) {
		t.Fatal("not dead-lettered after 5 failures")
	}
	tasks.DeadLetter(row, t0)
	if row.NotificationStatus != store.NotificationDeadLetter || row.NotificationAttemptCount != 5 ||
		!strings.HasPrefix(row.NotificationError, "Notification delivery stopped after 5 failed attempts: no stream") {
		t.Fatalf("dead letter: %+v", row)
	}
}

func TestOutboxNewerEvents(t *testing.T) {
	row := outboxRow()
	tasks.PrepareDispatch(row, 3)
	// A newer event arrives while version 1 is in flight.
	row.EventVersion = 2
	tasks.Delivered(row, 1, t0)
	if row.NotifiedVersion != 1 || row.NotificationStatus != store.NotificationPending || row.NotificationLeaseOwner != "" {
		t.Fatalf("delivered with a newer event: %+v", row)
	}
	// A retry row with a stale version is re-frozen and its attempts reset.
	row.NotificationStatus, row.NotificationAttemptCount = store.NotificationRetry, 4
	if !tasks.PrepareDispatch(row, 3) || row.DispatchVersion != 2 || row.NotificationAttemptCount != 0 {
		t.Fatalf("stale retry: %+v", row)
	}
	tasks.Delivered(row, 2, t0)
	if row.NotificationStatus != store.NotificationDelivered || row.NotifiedVersion != 2 || row.NextNotificationAt != nil {
		t.Fatalf("delivered: %+v", row)
	}
	// Dead-lettering while a newer event exists goes back to pending for it.
	row.NotificationAttemptCount, row.DispatchVersion, row.EventVersion = 5, 2, 3
	tasks.DeadLetter(row, t0.Add(time.Second))
	if row.NotificationStatus != store.NotificationPending || row.NotificationAttemptCount != 0 {
		t.Fatalf("dead letter with a newer event: %+v", row)
	}
}

func TestViewsCapAndHide(t *testing.T) {
	row := &store.Task{ID: "id", TaskName: "n", Status: "failed", RemoteTaskID: "secret-remote", ServerName: "srv",
		Error: strings.Repeat("e", 4000), LastPollError: strings.Repeat("p", 600), ConsecutivePollErrorCount: 3,
		NotificationStatus: store.NotificationNone, CancelRequestedAt: &t0}
	d := tasks.Detail(row, 3)
	if len(*d.Error) != 500 || len(*d.LastPollError) != 500 || !d.TrackingDegraded || !d.CancelRequested || d.LastCancelError != nil {
		t.Fatalf("detail: %+v", d)
	}
}
