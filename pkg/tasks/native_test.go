package tasks_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func TestParseNativeTask(t *testing.T) {
	long := strings.Repeat("x", 256)
	for _, tc := range []struct {
		name, raw, remote, wantErr string
	}{
		{"ok", `{"taskId":"a","status":"working","pollInterval":1500,"ttl":60000,"createdAt":"2026-12-01T10:00:00Z"}`, "a", ""},
		{"not an object", `[]`, "", "must be a JSON object"},
		{"no id", `{"status":"working"}`, "", "taskId must be a non-empty string"},
		{"bad status", `{"taskId":"a","status":"running"}`, "", "status must be one of working, input_required, completed, failed, cancelled"},
		{"other task", `{"taskId":"b","status":"working"}`, "a", "expected 'a', got 'b'"},
		{"long id", `{"taskId":"` + long + `","status":"working"}`, "", "must not exceed 255 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.ParseNativeTask("tool", tc.remote, json.RawMessage(tc.raw))
			if tc.wantErr != "" {
				var pe *tasks.ProtocolError
				if !errors.As(err, &pe) || !strings.Contains(pe.Message, tc.wantErr) {
					t.Fatalf("err = %v, want a protocol error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.PollInterval != 1500*time.Millisecond || got.TTLMS == nil || *got.TTLMS != 60000 || got.CreatedAt == nil || got.Terminal() {
				t.Errorf("task = %+v", got)
			}
		})
	}
	if _, err := tasks.ParseCreateTask("tool", json.RawMessage(`{"content":[]}`)); err == nil {
		t.Error("a plain CallToolResult was taken for a CreateTaskResult")
	}
}

func TestNewNativeTaskUsesTheUpstreamsIntervalAndTTL(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	created := now.Add(-5 * time.Second)
	ttl := int64(10000)
	row, err := tasks.NewNativeTask(tasks.NativeSubmit{UserID: "u", ThreadID: "th", ServerName: "srv", Tool: "long_report",
		Task: tasks.NativeTask{TaskID: "r", Status: "working", TTLMS: &ttl, CreatedAt: &created, PollInterval: 2 * time.Second}}, now, tasks.DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	d := tasks.NativeDataOf(row.DriverData)
	if row.DriverName != tasks.DriverNative || row.RemoteTaskID != "r" || row.Status != store.TaskStatusSubmitted || row.TaskName != "long_report" {
		t.Errorf("row = %+v", row)
	}
	if d.ExpiresAt == nil || !d.ExpiresAt.Equal(created.Add(10*time.Second)) || d.Tool != "long_report" {
		t.Errorf("driver data = %s", row.DriverData)
	}
	if !row.NextPollAt.Equal(now.Add(2 * time.Second)) {
		t.Errorf("first poll at %v, want the upstream's 2s", row.NextPollAt)
	}
	// A poll interval past the ttl's end is cut to it.
	row, _ = tasks.NewNativeTask(tasks.NativeSubmit{ServerName: "srv", Tool: "t",
		Task: tasks.NativeTask{TaskID: "r", TTLMS: &ttl, CreatedAt: &created, PollInterval: time.Minute}}, now, tasks.DefaultSettings())
	if !row.NextPollAt.Equal(created.Add(10 * time.Second)) {
		t.Errorf("first poll at %v, want the ttl's end", row.NextPollAt)
	}
	if !tasks.NativeDataOf(row.DriverData).Expired(created.Add(10*time.Second)) || tasks.NativeDataOf(row.DriverData).Expired(now) {
		t.Error("Expired is wrong around the ttl's end")
	}
}

func TestNativeFinal(t *testing.T) {
	s := tasks.DefaultSettings()
	done := tasks.NativeTask{TaskID: "r", Status: tasks.NativeCompleted}
	o, err := tasks.NativeFinal("tool", done, json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"r"},"keep":1}}`), "", s)
	if err != nil || o.Status != store.TaskStatusCompleted || o.Error != "" || strings.Contains(string(o.Result.Result), "related-task") || !strings.Contains(string(o.Result.Result), `"keep":1`) {
		t.Errorf("completed = %+v %s (%v)", o, o.Result.Result, err)
	}
	// isError: the task failed, with the tool's text.
	o, _ = tasks.NativeFinal("tool", done, json.RawMessage(`{"content":[{"type":"text","text":"disk full"}],"isError":true}`), "", s)
	if o.Status != store.TaskStatusFailed || o.Error != "MCP task tool 'tool' returned an error: disk full" {
		t.Errorf("isError = %+v", o)
	}
	// failed with a JSON-RPC error from tasks/result.
	o, _ = tasks.NativeFinal("tool", tasks.NativeTask{TaskID: "r", Status: tasks.NativeFailed}, nil, "boom", s)
	if o.Status != store.TaskStatusFailed || o.Error != "boom" {
		t.Errorf("failed = %+v", o)
	}
	// An oversized result is kept as a preview.
	s.MaxResultBytes = 64
	o, _ = tasks.NativeFinal("tool", done, json.RawMessage(`{"content":[{"type":"text","text":"`+strings.Repeat("a", 200)+`"}]}`), "", s)
	if !o.Result.Truncated || o.Result.Result != nil || o.Result.Preview == "" {
		t.Errorf("oversized = %+v", o.Result)
	}
	if _, err := tasks.NativeFinal("tool", done, json.RawMessage(`"text"`), "", s); err == nil {
		t.Error("a result that is not a CallToolResult was stored")
	}
}

func TestNativePendingInputRequired(t *testing.T) {
	o, err := tasks.NativePending(tasks.NativeTask{TaskID: "r", Status: tasks.NativeInputRequired, StatusMessage: "which one?", PollInterval: time.Second})
	if err != nil || o.Status != store.TaskStatusInputRequired || string(o.InputRequired) != `{"status_message":"which one?"}` || o.PollAfter != time.Second {
		t.Errorf("input_required = %+v (%v)", o, err)
	}
}

func TestParseCreateTaskOfTheTasksExtension(t *testing.T) {
	raw := json.RawMessage(`{"resultType":"task","taskId":"t-26","status":"working","createdAt":"2026-12-01T10:00:00Z","lastUpdatedAt":"2026-12-01T10:00:00Z","ttlMs":60000,"pollIntervalMs":500}`)
	task, err := tasks.ParseCreateTask("research", raw)
	if err != nil || task.TaskID != "t-26" || task.Status != tasks.NativeWorking || task.TTLMS == nil || *task.TTLMS != 60000 ||
		task.PollInterval != 500*time.Millisecond || task.CreatedAt == nil {
		t.Fatalf("tasks.ParseCreateTask = %+v, %v", task, err)
	}
	if _, err := tasks.ParseCreateTask("research", json.RawMessage(`{"resultType":"complete","content":[]}`)); err == nil {
		t.Error("a CallToolResult parsed as a CreateTaskResult")
	}
}
