package taskpoller_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func cancelTask(t *testing.T, h *harness, user, thread, id string) bus.TaskDetail {
	t.Helper()
	d, err := bus.Request[bus.TaskDetail](context.Background(), h.bus.NC, h.bus.Names.TasksCancel(),
		bus.TaskListRequest{UserID: user, ThreadID: thread, TaskID: id})
	if err != nil {
		t.Fatalf("cancel %s: %v", id, err)
	}
	return d
}

func TestCancelFencesAnInFlightPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		rid := h.fake.submit(map[string]any{"topic": "long", "steps": 50})
		row := insertTask(t, h.tasks, "u", "th", rid, reportTools)
		started, release := h.fake.hold(rid)
		var fenced int
		stats := make(chan taskpoller.PassStats, 100)
		h.start(func(_ *taskpoller.Config, d *taskpoller.Deps) {
			d.OnPass = func(s taskpoller.PassStats) {
				select {
				case stats <- s:
				default:
				}
			}
		})
		testkit.Receive(t, 30*time.Second, "a status call of the held task", started) // in flight under the poller's lease
		d := cancelTask(t, h, "u", "th", row.ID)
		if !d.CancelRequested || d.Status != store.TaskStatusSubmitted {
			t.Fatalf("cancel reply %+v", d)
		}
		if got := h.get(row.ID); got.LeaseOwner != "" {
			t.Fatalf("cancel request did not release the poll lease: %q", got.LeaseOwner)
		}
		release()
		got := h.waitStatus(row.ID, store.TaskStatusCancelled, 10*time.Second)
		for len(stats) > 0 {
			fenced += (<-stats).Fenced
		}
		testkit.Eventually(t, 5*time.Second, "the fenced poll to be counted", func() bool {
			for len(stats) > 0 {
				fenced += (<-stats).Fenced
			}
			return fenced >= 1
		})
		// The in-flight poll's "working" never landed; the cancel's result did.
		if got.LastPolledAt != nil || got.PollAttemptCount != 1 || got.CancelAttemptCount != 1 || got.CompletedAt == nil {
			t.Fatalf("cancelled row: %+v", got)
		}
		if n := h.fake.count("cancel_report", rid); n != 1 {
			t.Fatalf("cancel calls = %d, want 1", n)
		}
		// Repeating the request and cancelling a terminal task change nothing.
		again := cancelTask(t, h, "u", "th", row.ID)
		after := h.get(row.ID)
		if again.Status != store.TaskStatusCancelled || !after.CancelRequestedAt.Equal(*got.CancelRequestedAt) ||
			after.CancelAttemptCount != 1 || after.CompletedAt == nil || !after.CompletedAt.Equal(*got.CompletedAt) {
			t.Fatalf("repeat cancel changed the row: %+v", after)
		}
	})
}

func TestCancelRetriesUntilTerminal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
		flaky := insertTask(t, h.tasks, "u", "th", "c-flaky", tasks.DriverData{StatusTool: "never_status", CancelTool: "flaky_cancel"})
		running := insertTask(t, h.tasks, "u", "th", "c-running", tasks.DriverData{StatusTool: "never_status", CancelTool: "running_cancel"})
		for _, id := range []string{flaky.ID, running.ID} {
			if _, err := h.tasks.RequestCancel(context.Background(), store.RequestCancelParams{UserID: "u", ThreadID: "th", TaskID: id}); err != nil {
				t.Fatal(err)
			}
		}
		s := h.cfg.Tasks
		h.start(func(_ *taskpoller.Config, d *taskpoller.Deps) { d.Clock = func() time.Time { return t0 } })
		testkit.Eventually(t, 10*time.Second, "cancel failures with backoff", func() bool {
			row := h.get(flaky.ID)
			if row.LastCancelError != "" && row.Status != store.TaskStatusCancelled && row.LeaseOwner == "" {
				want := t0.Add(tasks.Backoff(row.CancelAttemptCount-1, s.PollInterval, s.MaxPollBackoff))
				if row.NextCancelAt == nil || !row.NextCancelAt.Equal(want) {
					t.Fatalf("after %d cancel attempts next_cancel_at = %v, want %v", row.CancelAttemptCount, row.NextCancelAt, want)
				}
			}
			return row.Status == store.TaskStatusCancelled
		})
		got := h.get(flaky.ID)
		if got.CancelAttemptCount != 3 || got.LastCancelError != "MCP task tool 'flaky_cancel' returned an error: cancel backend busy" ||
			got.NextCancelAt != nil || got.NextPollAt != nil {
			t.Fatalf("flaky cancel row: %+v", got)
		}
		got = h.waitStatus(running.ID, store.TaskStatusCancelled, 10*time.Second)
		if got.CancelAttemptCount != 2 || got.LastCancelError != "MCP task cancellation must return a terminal status" {
			t.Fatalf("non-terminal cancel reply row: %+v", got)
		}
		if n := h.fake.count("never_status", "c-flaky"); n != 0 {
			t.Fatalf("a cancel-requested task was polled %d times", n)
		}
	})
}

func TestCancelStoresTheRemoteTerminalStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		rid := h.fake.submit(map[string]any{"topic": "done already", "steps": 1})
		row := insertTask(t, h.tasks, "u", "th", rid, tasks.DriverData{StatusTool: "never_status", CancelTool: "cancel_report"})
		// The remote task completes (a status call outside mcpbus) before the
		// cancel reaches it: the cancel tool reports completed.
		advance(t, h.fake, rid)
		if _, err := h.tasks.RequestCancel(context.Background(), store.RequestCancelParams{UserID: "u", ThreadID: "th", TaskID: row.ID}); err != nil {
			t.Fatal(err)
		}
		h.start()
		got := h.waitStatus(row.ID, store.TaskStatusCompleted, 10*time.Second)
		var result map[string]string
		if err := json.Unmarshal(got.Result, &result); err != nil || result["report"] == "" {
			t.Fatalf("terminal result not stored: %s", got.Result)
		}
		if got.EventVersion != 1 {
			t.Fatalf("cancel outcome recorded no event: %+v", got)
		}
		// A terminal task is returned unchanged, without a cancel request.
		done := &store.Task{UserID: "u", ThreadID: "th", ServerName: "demo", DriverName: tasks.DriverStructured,
			RemoteTaskID: "finished", TaskName: "finished", Status: store.TaskStatusFailed, Error: "boom",
			DriverData: reportTools.Marshal()}
		if err := insertRow(h.tasks, done); err != nil {
			t.Fatal(err)
		}
		d := cancelTask(t, h, "u", "th", done.ID)
		if d.CancelRequested || d.Status != store.TaskStatusFailed || !d.UpdatedAt.Equal(done.UpdatedAt) {
			t.Fatalf("cancel of a terminal task: %+v", d)
		}
	})
}

// advance makes one status call on the demo outside mcpbus.
func advance(t *testing.T, f *fakeToolcall, rid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var call mcp.CallToolRequest
	call.Params.Name = "get_report_status"
	call.Params.Arguments = map[string]any{"task_id": rid}
	if _, err := f.mcp.CallTool(ctx, call); err != nil {
		t.Fatal(err)
	}
}
