package tasks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func TestNewTask(t *testing.T) {
	base := tasks.Submit{UserID: "u", ThreadID: "th", ServerName: "reports", TaskName: "report-generation",
		Toolset: tasks.DriverData{SubmitTool: "s", StatusTool: "st", CancelTool: "c"},
		Reply:   tasks.SubmitReply{RemoteTaskID: "remote-1"}}
	row, err := tasks.NewTask(base, t0, settings)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != "submitted" || row.NextPollAt.Sub(t0) != settings.PollInterval || row.DriverName != tasks.DriverStructured {
		t.Fatalf("row %+v", row)
	}
	if tool, _ := tasks.ToolFor(row.DriverData, tasks.RoleCancel); tool != "c" {
		t.Fatalf("driver data %s", row.DriverData)
	}
	hinted := base
	hinted.Reply.PollAfter = 2 * time.Second
	if row, _ := tasks.NewTask(hinted, t0, settings); row.NextPollAt.Sub(t0) != 2*time.Second {
		t.Fatalf("first poll ignores poll_after_seconds: %v", row.NextPollAt)
	}
	h := tasks.Handle(row)
	if h.Status != "submitted" || h.Message != "Task is running in the background." || h.TaskID != row.ID {
		t.Fatalf("handle %+v", h)
	}
	for _, tc := range []struct {
		mutate func(*tasks.Submit)
		want   string
	}{
		{func(s *tasks.Submit) { s.ServerName = "" }, "server_name must not be empty"},
		{func(s *tasks.Submit) { s.ServerName = strings.Repeat("s", 129) }, "server_name must not exceed 128 characters"},
		{func(s *tasks.Submit) { s.TaskName = " " }, "task_name must not be empty"},
		{func(s *tasks.Submit) { s.TaskName = strings.Repeat("n", 256) }, "task_name must not exceed 255 characters"},
		{func(s *tasks.Submit) { s.Reply.RemoteTaskID = strings.Repeat("r", 256) }, "MCP task remote_task_id must not exceed 255 characters"},
	} {
		s := base
		tc.mutate(&s)
		if _, err := tasks.NewTask(s, t0, settings); err == nil || err.Error() != tc.want {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	if got := tasks.DuplicateError("r", "srv"); got != "Remote MCP task 'r' is already tracked for server 'srv' by this user" {
		t.Fatal(got)
	}
}
