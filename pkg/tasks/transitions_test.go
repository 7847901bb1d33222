package tasks_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

var (
	t0       = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	settings = tasks.Settings{
		PollInterval: 5 * time.Second, MaxPollBackoff: 300 * time.Second, InputRequiredPollInterval: 60 * time.Second,
		TrackingDegradedAfterErrors: 3, MaxResultBytes: 1024, ResultPreviewMaxChars: 64,
	}
)

func leased(status string) *store.Task {
	exp := t0.Add(time.Minute)
	return &store.Task{ID: "mcp-task-1", TaskName: "report", Status: status, NotificationStatus: store.NotificationNone,
		LeaseOwner: "me", LeaseExpiresAt: &exp}
}

func TestApplyPoll(t *testing.T) {
	tests := []struct {
		name        string
		from        string
		outcome     tasks.Outcome
		wantStatus  string
		wantNext    time.Duration // -1: nil
		wantEvent   bool
		wantApplied bool
	}{
		{"submitted → working", "submitted", tasks.Outcome{Status: "working"}, "working", 5 * time.Second, false, true},
		{"working → working with hint", "working", tasks.Outcome{Status: "working", PollAfter: time.Second}, "working", time.Second, false, true},
		{"→ input_required", "working", tasks.Outcome{Status: "input_required", InputRequired: json.RawMessage(`{}`)}, "input_required", 60 * time.Second, true, true},
		{"→ completed", "working", tasks.Outcome{Status: "completed", Result: tasks.StoredResult{Result: json.RawMessage(`1`)}}, "completed", -1, true, true},
		{"→ failed", "input_required", tasks.Outcome{Status: "failed", Error: "x"}, "failed", -1, true, true},
		{"terminal never changes", "completed", tasks.Outcome{Status: "working"}, "completed", -1, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			row := leased(tc.from)
			row.ConsecutivePollErrorCount = 2
			row.LastPollError = "old"
			applied := tasks.ApplyPoll(row, tc.outcome, t0, settings)
			if applied != tc.wantApplied || row.Status != tc.wantStatus {
				t.Fatalf("applied %v status %s", applied, row.Status)
			}
			if !applied {
				return
			}
			if row.LeaseOwner != "" || row.LeaseExpiresAt != nil || row.ConsecutivePollErrorCount != 0 || row.LastPollError != "" || !row.LastPolledAt.Equal(t0) {
				t.Fatalf("bookkeeping: %+v", row)
			}
			if tc.wantNext < 0 {
				if row.NextPollAt != nil || row.CompletedAt == nil || !row.CompletedAt.Equal(t0) {
					t.Fatalf("terminal schedule: next %v completed %v", row.NextPollAt, row.CompletedAt)
				}
			} else if row.NextPollAt == nil || row.NextPollAt.Sub(t0) != tc.wantNext {
				t.Fatalf("next poll %v, want +%s", row.NextPollAt, tc.wantNext)
			}
			if got := row.EventVersion == 1; got != tc.wantEvent {
				t.Fatalf("event recorded = %v, want %v", got, tc.wantEvent)
			}
		})
	}
}

func TestApplyPollIgnoresCancelRequested(t *testing.T) {
	row := leased("working")
	row.CancelRequestedAt = &t0
	if tasks.ApplyPoll(row, tasks.Outcome{Status: "completed"}, t0, settings) || tasks.ApplyPollError(row, "x", t0, settings) {
		t.Fatal("a poll result was applied to a cancel-requested task")
	}
}

func TestApplyPollErrorBacksOffAndDegrades(t *testing.T) {
	row := leased("working")
	for n := range 5 {
		at := t0.Add(time.Duration(n) * time.Hour)
		tasks.ApplyPollError(row, "boom", at, settings)
		want := at.Add(tasks.Backoff(n, settings.PollInterval, settings.MaxPollBackoff))
		if !row.NextPollAt.Equal(want) || row.ConsecutivePollErrorCount != n+1 || row.Status != "working" || row.LastPollError != "boom" {
			t.Fatalf("after error %d: %+v", n+1, row)
		}
		degraded := n+1 >= settings.TrackingDegradedAfterErrors
		if tasks.TrackingDegraded(row, settings.TrackingDegradedAfterErrors) != degraded {
			t.Fatalf("degraded after %d errors = %v", n+1, !degraded)
		}
		// Degradation is an event; the same error while degraded is not a new one.
		if wantVersion := map[bool]int{false: 0, true: 1}[degraded]; row.EventVersion != wantVersion {
			t.Fatalf("after %d errors event_version = %d, want %d", n+1, row.EventVersion, wantVersion)
		}
	}
	tasks.ApplyPollError(row, "another error", t0, settings)
	if row.EventVersion != 2 {
		t.Fatalf("a new error while degraded is a new event: version %d", row.EventVersion)
	}
}

func TestApplyFailureAndCancel(t *testing.T) {
	row := leased("working")
	next := t0.Add(time.Second)
	row.NextCancelAt = &next
	if !tasks.ApplyFailure(row, "Remote MCP task was not found", t0, settings) || row.Status != "failed" ||
		row.NextPollAt != nil || row.NextCancelAt != nil || row.Error != "Remote MCP task was not found" || row.EventVersion != 1 {
		t.Fatalf("failure: %+v", row)
	}
	if tasks.ApplyFailure(row, "again", t0, settings) || row.Error != "Remote MCP task was not found" {
		t.Fatal("a terminal task changed")
	}

	c := leased("working")
	c.CancelRequestedAt, c.CancelAttemptCount = &t0, 3
	tasks.ApplyCancelError(c, "busy", t0, settings)
	if want := t0.Add(20 * time.Second); !c.NextCancelAt.Equal(want) || c.LastCancelError != "busy" || c.LeaseOwner != "" {
		t.Fatalf("cancel error: next %v (want %v) %+v", c.NextCancelAt, want, c)
	}
	if tasks.ApplyCancel(c, tasks.Outcome{Status: "working"}, t0, settings) {
		t.Fatal("a non-terminal cancel outcome was applied")
	}
	if !tasks.ApplyCancel(c, tasks.Outcome{Status: "cancelled"}, t0, settings) || c.Status != "cancelled" ||
		c.NextCancelAt != nil || c.NextPollAt != nil || c.CompletedAt == nil || c.EventVersion != 1 {
		t.Fatalf("cancel: %+v", c)
	}
}
