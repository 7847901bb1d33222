package tasks_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func TestFingerprintSortsKeys(t *testing.T) {
	a := bus.TaskEvent{TaskID: "t", Status: "completed", Result: json.RawMessage(`{"b":1,"a":[2,{"d":3,"c":4}]}`)}
	b := a
	b.Result = json.RawMessage(`{ "a" : [2, {"c":4, "d":3}], "b": 1 }`)
	if tasks.Fingerprint(a) != tasks.Fingerprint(b) {
		t.Fatal("key order or whitespace changed the fingerprint")
	}
	c := a
	c.Result = json.RawMessage(`{"b":2,"a":[2,{"d":3,"c":4}]}`)
	if tasks.Fingerprint(a) == tasks.Fingerprint(c) {
		t.Fatal("a different result kept the fingerprint")
	}
	if len(tasks.Fingerprint(a)) != 64 {
		t.Fatal("not a hex sha256")
	}
}

func TestBuildEvent(t *testing.T) {
	row := &store.Task{ID: "id", TaskName: "n", Status: "working", ConsecutivePollErrorCount: 2, LastPollError: "down"}
	if ev := tasks.BuildEvent(row, 3); ev.TrackingDegraded || ev.LastPollError != nil {
		t.Fatalf("not degraded yet: %+v", ev)
	}
	row.ConsecutivePollErrorCount = 3
	ev := tasks.BuildEvent(row, 3)
	if !ev.TrackingDegraded || ev.LastPollError == nil || *ev.LastPollError != "down" {
		t.Fatalf("degraded: %+v", ev)
	}
	raw, _ := json.Marshal(ev)
	for _, k := range []string{"task_id", "task_name", "status", "result", "result_preview", "result_truncated",
		"result_artifact", "error", "input_required", "tracking_degraded", "last_poll_error"} {
		if !strings.Contains(string(raw), `"`+k+`":`) {
			t.Fatalf("event lacks %s: %s", k, raw)
		}
	}
}

func TestRecordEventVersionRules(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		notif       string
		status      string
		wantVersion int
		wantNotif   string
	}{
		{"not eventful", store.NotificationNone, "working", 0, store.NotificationNone},
		{"input_required from none", store.NotificationNone, "input_required", 1, store.NotificationPending},
		{"terminal from delivered resets", store.NotificationDelivered, "completed", 1, store.NotificationPending},
		{"from dead_letter resets", store.NotificationDeadLetter, "failed", 1, store.NotificationPending},
		{"claimed keeps its delivery", store.NotificationClaimed, "completed", 1, store.NotificationClaimed},
		{"retry keeps its delivery", store.NotificationRetry, "completed", 1, store.NotificationRetry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			row := &store.Task{ID: "id", Status: tc.status, NotificationStatus: tc.notif, NotificationAttemptCount: 3}
			tasks.RecordEvent(row, 3, now)
			if row.EventVersion != tc.wantVersion || row.NotificationStatus != tc.wantNotif {
				t.Fatalf("version %d status %s", row.EventVersion, row.NotificationStatus)
			}
			if tc.wantNotif == store.NotificationPending && (row.NotificationAttemptCount != 0 || !row.NextNotificationAt.Equal(now)) {
				t.Fatalf("reset: %+v", row)
			}
			// The same state again is not a new event.
			tasks.RecordEvent(row, 3, now)
			if row.EventVersion != tc.wantVersion {
				t.Fatalf("unchanged state bumped the version to %d", row.EventVersion)
			}
		})
	}
}
