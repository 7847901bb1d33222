package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// taskFake is a task server whose submit answers what the test scripts and
// which counts submits and cancels.
type taskFake struct {
	submits, cancels atomic.Int64
	reply            atomic.Value // the submit's structuredContent
}

func newTaskFake(t *testing.T) (*taskFake, string) {
	t.Helper()
	f := &taskFake{}
	f.reply.Store(map[string]any{"task_id": "remote-1", "status": "running"})
	s := server.NewMCPServer("tasks", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("submit_report"), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.submits.Add(1)
		return mcp.NewToolResultStructuredOnly(f.reply.Load()), nil
	})
	s.AddTool(mcp.NewTool("get_report_status"), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultStructuredOnly(map[string]any{"task_id": "remote-1", "status": "running"}), nil
	})
	s.AddTool(mcp.NewTool("cancel_report"), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		f.cancels.Add(1)
		return mcp.NewToolResultStructuredOnly(map[string]any{"task_id": r.GetString("task_id", ""), "status": "cancelled"}), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return f, hs.URL + "/mcp"
}

func taskStore(t *testing.T) store.Store { return testkit.SQLiteStore(t) }

func startTasks(t *testing.T, url string, st store.Store, enabled bool) *env {
	t.Helper()
	cfg := fmt.Sprintf(`{"mcpServers": {"reports": {"type": "http", "url": %q, "task_toolsets": [
		{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}}}`, url)
	mt := config.DefaultSettings().MCPTasks
	mt.Enabled = enabled
	var ts store.TaskStore
	if st != nil {
		ts = st.Tasks()
	}
	return startWith(t, options{cfg: cfg, catalog: []bus.Tool{
		{Name: "reports_submit_report", Server: "reports", OriginalName: "submit_report", TaskToolset: "report-generation"},
		{Name: "reports_get_report_status", Server: "reports", OriginalName: "get_report_status"},
		{Name: "reports_cancel_report", Server: "reports", OriginalName: "cancel_report"},
	}, tasks: ts, mcpTasks: mt})
}

func TestSubmitStoresTheTaskAndReturnsOnlyTheLocalHandle(t *testing.T) {
	t.Parallel()
	fake, url := newTaskFake(t)
	st := taskStore(t)
	e := startTasks(t, url, st, true)

	r := e.mustCall(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th-1",
		RunID: "run-1", Arguments: json.RawMessage(`{"topic":"q3"}`)})
	if r.Task == nil || r.Task.Status != "submitted" || r.Task.TaskName != "report-generation" || !strings.HasPrefix(r.Task.TaskID, "mcp-task-") {
		t.Fatalf("task handle = %+v", r.Task)
	}
	if raw, _ := json.Marshal(r); strings.Contains(string(raw), "remote-1") {
		t.Fatalf("the remote task id left mcpbus: %s", raw)
	}
	var text struct{ Text string }
	_ = json.Unmarshal(r.Content[0], &text)
	var handle bus.TaskHandle
	if err := json.Unmarshal([]byte(text.Text), &handle); err != nil || handle != *r.Task {
		t.Errorf("text content %q is not the handle %+v", text.Text, r.Task)
	}
	row, err := st.Tasks().GetTask(context.Background(), store.GetTaskParams{ID: r.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	if row.RemoteTaskID != "remote-1" || row.UserID != "alice" || row.ThreadID != "th-1" || row.RunID != "run-1" ||
		row.ServerName != "reports" || row.Status != store.TaskStatusSubmitted || row.NextPollAt == nil {
		t.Errorf("row = %+v", row)
	}
	for _, want := range []string{`"submit_tool":"submit_report"`, `"status_tool":"get_report_status"`, `"cancel_tool":"cancel_report"`} {
		if !strings.Contains(string(row.DriverData), want) {
			t.Errorf("driver data %s lacks %s", row.DriverData, want)
		}
	}

	// The same remote id again for this user: refused, and no cancel.
	_, err = e.call(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th-1"})
	if !errors.Is(err, bus.ErrInvalidRequest) || !strings.Contains(err.Error(), "already tracked") {
		t.Fatalf("duplicate submit: %v", err)
	}
	if fake.cancels.Load() != 0 {
		t.Errorf("a duplicate was cancelled remotely (%d cancels)", fake.cancels.Load())
	}
	// Another user may track the same remote id.
	e.mustCall(t, bus.Call{Tool: "reports_submit_report", UserID: "bob", ThreadID: "th-1"})
}

func TestSubmitFailureAfterTheRemoteSubmitCancelsIt(t *testing.T) {
	t.Parallel()
	fake, url := newTaskFake(t)
	fake.reply.Store(map[string]any{"task_id": strings.Repeat("x", 300), "status": "running"})
	e := startTasks(t, url, taskStore(t), true)
	_, err := e.call(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th-1"})
	if err == nil || !strings.Contains(err.Error(), "must not exceed 255 characters") {
		t.Fatalf("err = %v", err)
	}
	if fake.cancels.Load() != 1 {
		t.Errorf("cancels = %d, want the one best-effort cancel\n%s", fake.cancels.Load(), e.logs.String())
	}
}

func TestSubmitProtocolViolationIsAnError(t *testing.T) {
	t.Parallel()
	fake, url := newTaskFake(t)
	fake.reply.Store(map[string]any{"task_id": "r", "status": "completed"})
	st := taskStore(t)
	e := startTasks(t, url, st, true)
	_, err := e.call(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th-1"})
	if err == nil || !strings.Contains(err.Error(), "submit_report") {
		t.Fatalf("err = %v", err)
	}
	rows, _ := st.Tasks().ListTasks(context.Background(), store.ListTasksParams{Namespace: e.bus.Names.Namespace(), UserID: "alice", ThreadID: "th-1"})
	if len(rows) != 0 {
		t.Errorf("a task row was stored for a bad submit: %+v", rows)
	}
	if fake.cancels.Load() != 1 {
		t.Errorf("cancels = %d: the refused remote task was left running", fake.cancels.Load())
	}
}

func TestSubmitWithoutTaskRuntimeNeverReachesTheServer(t *testing.T) {
	t.Parallel()
	fake, url := newTaskFake(t)
	e := startTasks(t, url, nil, false)
	_, err := e.call(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th-1"})
	if err == nil || !strings.Contains(err.Error(), "task runtime is not initialized") {
		t.Fatalf("err = %v", err)
	}
	if fake.submits.Load() != 0 {
		t.Errorf("the upstream received %d submits", fake.submits.Load())
	}
}

func TestStatusAndCancelToolsAreInternalAndThreadIDsChecked(t *testing.T) {
	t.Parallel()
	fake, url := newTaskFake(t)
	e := startTasks(t, url, taskStore(t), true)
	for _, tool := range []string{"reports_get_report_status", "reports_cancel_report"} {
		if _, err := e.call(t, bus.Call{Tool: tool, Arguments: json.RawMessage(`{"task_id":"remote-1"}`)}); !errors.Is(err, bus.ErrNotFound) {
			t.Errorf("%s: %v, want not_found", tool, err)
		}
	}
	if _, err := e.call(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th.1"}); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("thread id with a dot: %v", err)
	}
	if fake.submits.Load() != 0 || fake.cancels.Load() != 0 {
		t.Errorf("refused calls reached the upstream: %d submits, %d cancels", fake.submits.Load(), fake.cancels.Load())
	}
}

// TestSubmitWithTheDatabaseDownIsUnavailable closes the PostgreSQL pool
// after the service started: the remote submit succeeds, the insert cannot
// reach the database. The caller gets unavailable (503), not
// invalid_request, and none of the driver's text (it stays in the logs);
// the remote task is cancelled.
func TestSubmitWithTheDatabaseDownIsUnavailable(t *testing.T) {
	t.Parallel()
	fake, url := newTaskFake(t)
	st := testkit.PostgresStore(t, nil)
	e := startTasks(t, url, st, true)
	if err := st.Close(); err != nil {
		t.Fatalf("close the pool: %v", err)
	}
	_, err := e.call(t, bus.Call{Tool: "reports_submit_report", UserID: "alice", ThreadID: "th-1"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUnavailable || be.Code.HTTPStatus() != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want unavailable", err)
	}
	for _, leak := range []string{"closed", "postgres", "store:"} {
		if strings.Contains(be.Message, leak) {
			t.Errorf("the caller's message quotes the driver (%q): %q", leak, be.Message)
		}
	}
	if be.Cause != nil {
		t.Errorf("a cause crossed the bus: %v", be.Cause)
	}
	if fake.cancels.Load() != 1 {
		t.Errorf("cancels = %d, want the one best-effort cancel", fake.cancels.Load())
	}
	if logs := e.logs.String(); !strings.Contains(logs, "database is closed") {
		t.Errorf("the cause was not logged:\n%s", logs)
	}
}
