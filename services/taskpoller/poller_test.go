package taskpoller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func TestRunningToWorkingToCompleted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		rid := h.fake.submit(map[string]any{"topic": "otters", "steps": 2})
		row := insertTask(t, h.tasks, "alice", "th-1", rid, reportTools)
		h.start()
		working := h.waitStatus(row.ID, store.TaskStatusWorking, 10*time.Second)
		if working.LastPolledAt == nil || working.NextPollAt == nil || working.LeaseOwner != "" {
			t.Fatalf("working row: %+v", working)
		}
		// The demo asks for poll_after_seconds 1: the next poll is 1s after the call ended.
		if d := working.NextPollAt.Sub(*working.LastPolledAt); d < 990*time.Millisecond || d > 1010*time.Millisecond {
			t.Fatalf("next poll %s after the last, want 1s (poll_after_seconds)", d)
		}
		done := h.waitStatus(row.ID, store.TaskStatusCompleted, 15*time.Second)
		var result struct{ Report string }
		if err := json.Unmarshal(done.Result, &result); err != nil || !strings.Contains(result.Report, "otters") {
			t.Fatalf("result %s (%v)", done.Result, err)
		}
		if done.CompletedAt == nil || done.NextPollAt != nil || done.ConsecutivePollErrorCount != 0 {
			t.Fatalf("completed row: %+v", done)
		}
		if n := h.fake.count("get_report_status", rid); n != 2 {
			t.Fatalf("status calls = %d, want 2 (one per step)", n)
		}
		if done.PollAttemptCount != 2 {
			t.Fatalf("poll_attempt_count = %d, want 2", done.PollAttemptCount)
		}
		// The background call carried the owner and no secrets.
		for _, req := range h.fake.requests {
			if req.UserID != "alice" || req.ThreadID != "th-1" || req.Server != "demo" || req.TimeoutMS <= 0 {
				t.Fatalf("internal call %+v", req)
			}
		}
	})
}

func TestInputRequiredIsPolledAtTheSlowerInterval(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		rid := h.fake.submit(map[string]any{"topic": "q", "need_input": true})
		row := insertTask(t, h.tasks, "u", "th", rid, reportTools)
		other := insertTask(t, h.tasks, "u", "th", "slow-1", tasks.DriverData{StatusTool: "slow_input_status", CancelTool: "cancel_report"})
		h.start()
		for _, id := range []string{row.ID, other.ID} {
			got := h.waitStatus(id, store.TaskStatusInputRequired, 10*time.Second)
			if got.InputRequired == nil || got.NextPollAt == nil {
				t.Fatalf("input_required row: %+v", got)
			}
			// poll_after_seconds 1 is raised to input_required_poll_interval_seconds (3s here).
			if d := got.NextPollAt.Sub(*got.LastPolledAt); d < 2990*time.Millisecond || d > 3010*time.Millisecond {
				t.Fatalf("input_required next poll after %s, want 3s", d)
			}
			if got.EventVersion != 1 || got.NotificationStatus == store.NotificationNone {
				t.Fatalf("input_required recorded no event: version %d status %s", got.EventVersion, got.NotificationStatus)
			}
		}
	})
}

func TestPermanentFailures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		cases := []struct {
			remoteID, tool, wantError string
		}{
			{"rpt-unknown", "get_report_status", `task "rpt-unknown" not found`},
			{"t1", "text_status", "MCP task tool 'text_status' must return structuredContent; text content is not parsed"},
			{"t2", "mismatch_status", "MCP task response task_id does not match the persisted remote task: expected 't2', got 'someone-else'"},
			{"t3", "bad_poll_after_status", "Invalid structuredContent from MCP task tool 'bad_poll_after_status': poll_after_seconds must be a positive finite number"},
			{"t4", "no_input_status", "Invalid structuredContent: input_required status requires input_required"},
			{"t5", "huge_input_status", "MCP task input_required payload exceeds the 65536-byte limit"},
		}
		ids := map[string]string{}
		for _, c := range cases {
			row := insertTask(t, h.tasks, "u", "th", c.remoteID, tasks.DriverData{StatusTool: c.tool, CancelTool: "cancel_report"})
			ids[c.remoteID] = row.ID
		}
		missing := &store.Task{UserID: "u", ThreadID: "th", ServerName: "demo", DriverName: tasks.DriverStructured,
			RemoteTaskID: "t6", TaskName: "no status tool", DriverData: json.RawMessage(`{"cancel_tool":"cancel_report"}`),
			NextPollAt: ptr(time.Now())}
		if err := insertRow(h.tasks, missing); err != nil {
			t.Fatal(err)
		}
		h.start()
		for _, c := range cases {
			got := h.waitStatus(ids[c.remoteID], store.TaskStatusFailed, 10*time.Second)
			if got.Error != c.wantError {
				t.Errorf("%s: error %q, want %q", c.tool, got.Error, c.wantError)
			}
			if got.NextPollAt != nil || got.CompletedAt == nil {
				t.Errorf("%s: failed row still scheduled: %+v", c.tool, got)
			}
			if n := h.fake.count(c.tool, c.remoteID); n != 1 {
				t.Errorf("%s: %d calls, want 1 (permanent)", c.tool, n)
			}
		}
		got := h.waitStatus(missing.ID, store.TaskStatusFailed, 10*time.Second)
		if got.Error != "Task driver_data is missing required 'status_tool'" {
			t.Errorf("missing status tool: %q", got.Error)
		}
	})
}

func TestToolErrorsRetryWithBackoffAndDegradeTracking(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		// The clock says every call ended at t0, an hour ago: the backoff from
		// t0 is exact and the row stays due, so the errors follow one another.
		t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
		down := insertTask(t, h.tasks, "u", "th", "down-1", tasks.DriverData{StatusTool: "flaky_status", CancelTool: "cancel_report"})
		flaky := insertTask(t, h.tasks, "u", "th", "flaky-1", tasks.DriverData{StatusTool: "flaky_status", CancelTool: "cancel_report"})
		h.start(func(_ *taskpoller.Config, d *taskpoller.Deps) { d.Clock = func() time.Time { return t0 } })
		s := h.cfg.Tasks
		testkit.Eventually(t, 10*time.Second, "five consecutive errors", func() bool {
			row := h.get(down.ID)
			n := row.ConsecutivePollErrorCount
			if n > 0 {
				want := t0.Add(tasks.Backoff(n-1, s.PollInterval, s.MaxPollBackoff))
				if !row.NextPollAt.Equal(want) {
					t.Fatalf("after %d errors next_poll_at = %v, want %v", n, row.NextPollAt, want)
				}
				if row.LastPollError != "MCP task tool 'flaky_status' returned an error: upstream overloaded, try later" {
					t.Fatalf("last_poll_error %q", row.LastPollError)
				}
				if row.Status != store.TaskStatusSubmitted {
					t.Fatalf("a tool error changed the status to %s", row.Status)
				}
			}
			return n >= 5
		})
		detail, err := bus.Request[bus.TaskDetail](context.Background(), h.bus.NC, h.bus.Names.TasksGet(),
			bus.TaskListRequest{UserID: "u", ThreadID: "th", TaskID: down.ID})
		if err != nil {
			t.Fatal(err)
		}
		if !detail.TrackingDegraded || detail.LastPollError == nil {
			t.Fatalf("detail after repeated errors: %+v", detail)
		}
		// Degraded tracking is an event.
		if row := h.get(down.ID); row.EventVersion < 1 {
			t.Fatalf("degraded tracking recorded no event: %+v", row)
		}
		// Three errors, then the task completes and the error count resets.
		done := h.waitStatus(flaky.ID, store.TaskStatusCompleted, 10*time.Second)
		if done.ConsecutivePollErrorCount != 0 || done.LastPollError != "" || h.fake.count("flaky_status", "flaky-1") != 4 {
			t.Fatalf("recovered row: %+v after %d calls", done, h.fake.count("flaky_status", "flaky-1"))
		}
	})
}

func TestTransportErrorsAreRetriedAndUnresolvableHandlesFail(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.fake.fail("get_report_status", bus.Errorf(bus.CodeUpstreamTimeout, "upstream timed out"))
		rid := h.fake.submit(map[string]any{"topic": "x", "steps": 1})
		row := insertTask(t, h.tasks, "u", "th", rid, reportTools)
		gone := insertTask(t, h.tasks, "u", "th", "gone-1", tasks.DriverData{StatusTool: "gone_status", CancelTool: "cancel_report"})
		h.fake.fail("gone_status", bus.PermanentCallError("personal MCP connection 'mine-1a2b' no longer exists"))
		h.start()
		testkit.Eventually(t, 10*time.Second, "transport errors counted", func() bool {
			return h.get(row.ID).ConsecutivePollErrorCount >= 2
		})
		if got := h.get(row.ID); got.LastPollError != "upstream timed out" || got.Status != store.TaskStatusSubmitted {
			t.Fatalf("after transport errors: %+v", got)
		}
		failed := h.waitStatus(gone.ID, store.TaskStatusFailed, 10*time.Second)
		if failed.Error != "personal MCP connection 'mine-1a2b' no longer exists" {
			t.Fatalf("unresolvable handle error %q", failed.Error)
		}
		h.fake.fail("get_report_status", nil)
		h.waitStatus(row.ID, store.TaskStatusCompleted, 10*time.Second)
	})
}

func TestOversizedResultKeepsPreviewAndArtifact(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.cfg.Tasks.MaxResultBytes = 1024
		h.cfg.Tasks.ResultPreviewMaxChars = 64
		row := insertTask(t, h.tasks, "u", "th", "big-1", tasks.DriverData{StatusTool: "big_result_status", CancelTool: "cancel_report"})
		h.start()
		got := h.waitStatus(row.ID, store.TaskStatusCompleted, 10*time.Second)
		if got.Result != nil || !got.ResultTruncated {
			t.Fatalf("oversized result stored: truncated=%v result=%.80s", got.ResultTruncated, got.Result)
		}
		if want := "BEGIN" + strings.Repeat("x", 59); got.ResultPreview != want {
			t.Fatalf("preview %q, want the first 64 characters of the string", got.ResultPreview)
		}
		var artifact map[string]string
		if err := json.Unmarshal(got.ResultArtifact, &artifact); err != nil || artifact["uri"] != "s3://reports/big-1" {
			t.Fatalf("artifact %s", got.ResultArtifact)
		}
	})
}

func ptr(t time.Time) *time.Time { return &t }
