package taskpoller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func TestTaskAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		never := tasks.DriverData{StatusTool: "never_status", CancelTool: "cancel_report"}
		var mine []string
		for i := range 3 {
			mine = append(mine, insertTask(t, h.tasks, "alice", "th-a", fmt.Sprint("rmt-secret-", i), never).ID)
		}
		theirs := insertTask(t, h.tasks, "bob", "th-a", "b0", never)
		elsewhere := insertTask(t, h.tasks, "alice", "th-b", "a-other", never)
		long := &store.Task{UserID: "alice", ThreadID: "th-a", ServerName: "demo", DriverName: tasks.DriverStructured,
			RemoteTaskID: "a-long", TaskName: "long error", Status: store.TaskStatusFailed,
			Error: strings.Repeat("e", 4000), DriverData: never.Marshal(),
			// Newest by a clear margin: tasks created in the same
			// millisecond have no defined order.
			CreatedAt: time.Now().Add(time.Second)}
		if err := insertRow(h.tasks, long); err != nil {
			t.Fatal(err)
		}
		// Only the API: disabled polling would reply unavailable, so run the
		// poller with a long interval instead.
		h.cfg.Tasks.PollInterval = time.Hour
		h.start()
		ctx := context.Background()
		req := func(subject string, r bus.TaskListRequest) (json.RawMessage, error) {
			return bus.Request[json.RawMessage](ctx, h.bus.NC, subject, r)
		}

		raw, err := req(h.bus.Names.TasksList(), bus.TaskListRequest{UserID: "alice", ThreadID: "th-a"})
		if err != nil {
			t.Fatal(err)
		}
		var list bus.TaskListReply
		_ = json.Unmarshal(raw, &list)
		if len(list.Tasks) != 4 {
			t.Fatalf("list = %d tasks, want alice's 4 in th-a", len(list.Tasks))
		}
		if list.Tasks[0].TaskID != long.ID {
			t.Fatalf("list is not newest first: %+v", list.Tasks)
		}
		if e := list.Tasks[0].Error; e == nil || len(*e) != 500 {
			t.Fatalf("list error not capped at 500 characters")
		}
		for _, forbidden := range []string{"remote_task_id", "server_name", "driver_data", "rmt-secret", "never_status", "demo"} {
			if strings.Contains(string(raw), forbidden) {
				t.Fatalf("list reply leaks %q: %s", forbidden, raw)
			}
		}
		raw, _ = req(h.bus.Names.TasksList(), bus.TaskListRequest{UserID: "alice", ThreadID: "th-a", Limit: 2})
		_ = json.Unmarshal(raw, &list)
		if len(list.Tasks) != 2 {
			t.Fatalf("limit 2 gave %d", len(list.Tasks))
		}

		// Every thread: alice's five tasks with their threads, none of bob's;
		// a thread's list leaves thread_id out (the reference's fields).
		raw, _ = req(h.bus.Names.TasksList(), bus.TaskListRequest{UserID: "alice"})
		_ = json.Unmarshal(raw, &list)
		threads := map[string]int{}
		for _, it := range list.Tasks {
			threads[it.ThreadID]++
			if it.TaskID == theirs.ID {
				t.Fatal("the list over every thread holds another user's task")
			}
		}
		if len(list.Tasks) != 5 || threads["th-a"] != 4 || threads["th-b"] != 1 {
			t.Fatalf("alice's tasks over every thread: %v (%d)", threads, len(list.Tasks))
		}
		if raw, _ = req(h.bus.Names.TasksList(), bus.TaskListRequest{UserID: "alice", ThreadID: "th-b"}); strings.Contains(string(raw), `"thread_id"`) {
			t.Fatalf("a thread's list carries thread_id: %s", raw)
		}

		for _, bad := range []bus.TaskListRequest{
			{UserID: "alice", ThreadID: "th-a", Limit: 101},
			{UserID: "alice", ThreadID: "th-a", Limit: -1},
			{UserID: "alice", ThreadID: "bad thread!"},
			{UserID: "alice", ThreadID: strings.Repeat("t", 65)},
			{ThreadID: "th-a"},
		} {
			if _, err := req(h.bus.Names.TasksList(), bad); !errors.Is(err, bus.ErrInvalidRequest) {
				t.Errorf("list %+v: %v, want invalid_request", bad, err)
			}
		}

		raw, err = req(h.bus.Names.TasksGet(), bus.TaskListRequest{UserID: "alice", ThreadID: "th-a", TaskID: mine[0]})
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		_ = json.Unmarshal(raw, &fields)
		for _, k := range []string{"task_id", "task_name", "status", "created_at", "updated_at", "error", "tracking_degraded",
			"cancel_requested", "last_polled_at", "last_poll_error", "last_cancel_error", "cancel_attempt_count",
			"notification_status", "notification_error", "notification_attempt_count", "result", "result_preview",
			"result_truncated", "result_artifact", "input_required"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("detail lacks %q", k)
			}
		}
		if len(fields) != 20 {
			t.Errorf("detail has %d fields, want the 20 of the reference: %s", len(fields), raw)
		}
		if _, err := time.Parse(time.RFC3339Nano, fields["created_at"].(string)); err != nil {
			t.Errorf("created_at is not ISO: %v", fields["created_at"])
		}
		for _, other := range []bus.TaskListRequest{
			{UserID: "alice", ThreadID: "th-a", TaskID: theirs.ID},
			{UserID: "alice", ThreadID: "th-a", TaskID: elsewhere.ID},
			{UserID: "alice", ThreadID: "th-a", TaskID: "mcp-task-nope"},
		} {
			for _, subject := range []string{h.bus.Names.TasksGet(), h.bus.Names.TasksCancel()} {
				_, err := req(subject, other)
				var be *bus.Error
				if !errors.As(err, &be) || be.Code != bus.CodeNotFound || be.Message != "MCP task not found" {
					t.Errorf("%s %+v: %v, want not_found", subject, other, err)
				}
			}
		}
		if row := h.get(theirs.ID); row.CancelRequestedAt != nil {
			t.Fatal("another user's cancel request was recorded")
		}

		// Cancel records the request once; a repeat changes nothing.
		d1, err := bus.Request[bus.TaskDetail](ctx, h.bus.NC, h.bus.Names.TasksCancel(), bus.TaskListRequest{UserID: "alice", ThreadID: "th-a", TaskID: mine[1]})
		if err != nil || !d1.CancelRequested {
			t.Fatalf("cancel: %+v %v", d1, err)
		}
		first := h.get(mine[1])
		if _, err := bus.Request[bus.TaskDetail](ctx, h.bus.NC, h.bus.Names.TasksCancel(), bus.TaskListRequest{UserID: "alice", ThreadID: "th-a", TaskID: mine[1]}); err != nil {
			t.Fatal(err)
		}
		second := h.get(mine[1])
		if !first.CancelRequestedAt.Equal(*second.CancelRequestedAt) || !first.NextCancelAt.Equal(*second.NextCancelAt) {
			t.Fatalf("repeat cancel changed the request: %+v → %+v", first, second)
		}
	})
}

func TestTaskAPIUnavailableWhenDisabled(t *testing.T) {
	t.Parallel()
	h := setup(t, store.BackendSQLite)
	h.start(func(c *taskpoller.Config, d *taskpoller.Deps) {
		c.Enabled = false
		d.Tasks, d.Events = nil, nil
	})
	_, err := bus.Request[bus.TaskListReply](context.Background(), h.bus.NC, h.bus.Names.TasksList(), bus.TaskListRequest{UserID: "u", ThreadID: "th"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUnavailable || be.Message != "MCP task service not available" {
		t.Fatalf("list while disabled: %v", err)
	}
}
