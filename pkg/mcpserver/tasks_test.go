package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

func TestTaskOfMapsDurableStatuses(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	boom := "remote said no"
	for _, c := range []struct {
		item         bus.TaskItem
		status, msg  string
		pollInterval bool
	}{
		{bus.TaskItem{Status: "submitted"}, "working", "", true},
		{bus.TaskItem{Status: "working", CancelRequested: true}, "working", "Cancellation requested", true},
		{bus.TaskItem{Status: "working", TrackingDegraded: true}, "working", "cannot reach", true},
		{bus.TaskItem{Status: "input_required"}, "input_required", "needs input", true},
		{bus.TaskItem{Status: "failed", Error: &boom}, "failed", boom, false},
		{bus.TaskItem{Status: "cancelled", CancelRequested: true}, "cancelled", "cancelled", false},
		{bus.TaskItem{Status: "completed"}, "completed", "", false},
	} {
		c.item.TaskID, c.item.CreatedAt, c.item.UpdatedAt = "mcp-task-1", at, at.Add(time.Second)
		got := taskOf(c.item)
		if got.Status != c.status || (c.msg == "") != (got.StatusMessage == "") || !strings.Contains(got.StatusMessage, c.msg) ||
			(got.PollInterval != 0) != c.pollInterval || got.TTL != nil ||
			got.CreatedAt != "2026-12-01T10:00:00Z" || got.LastUpdatedAt != "2026-12-01T10:00:01Z" {
			t.Errorf("taskOf(%+v) = %+v", c.item, got)
		}
	}
}

func TestResultOfTerminalTasks(t *testing.T) {
	boom := "remote said no"
	preview := "Report on ..."
	for name, c := range map[string]struct {
		d       bus.TaskDetail
		isError bool
		text    string
		sc      bool
	}{
		"completed":      {bus.TaskDetail{TaskItem: bus.TaskItem{Status: "completed"}, Result: json.RawMessage(`{"report":"r"}`)}, false, `{"report":"r"}`, true},
		"scalar":         {bus.TaskDetail{TaskItem: bus.TaskItem{Status: "completed"}, Result: json.RawMessage(`"r"`)}, false, `"r"`, false},
		"truncated":      {bus.TaskDetail{TaskItem: bus.TaskItem{Status: "completed"}, ResultTruncated: true, ResultPreview: &preview, ResultArtifact: json.RawMessage(`{"path":"a"}`)}, false, "truncated", false},
		"failed":         {bus.TaskDetail{TaskItem: bus.TaskItem{Status: "failed", Error: &boom}}, true, "The task failed: " + boom, false},
		"cancelled":      {bus.TaskDetail{TaskItem: bus.TaskItem{Status: "cancelled"}}, true, "cancelled", false},
		"no result body": {bus.TaskDetail{TaskItem: bus.TaskItem{Status: "completed"}}, false, "completed", false},
	} {
		c.d.TaskID = "mcp-task-9"
		res := resultOf(c.d)
		raw, _ := json.Marshal(res)
		if res.IsError != c.isError || len(res.Content) != 1 || !strings.Contains(string(res.Content[0]), strings.ReplaceAll(c.text, `"`, `\"`)) ||
			(res.StructuredContent != nil) != c.sc || !strings.Contains(string(raw), `"io.modelcontextprotocol/related-task":{"taskId":"mcp-task-9"}`) {
			t.Errorf("%s: resultOf = %s", name, raw)
		}
	}
}

func TestTaskListCursorsAreOurs(t *testing.T) {
	s := &Server{cfg: Config{PageSize: 2}.withDefaults()}
	for _, c := range []string{"", "bm90LW91cnM", "not base64!"} {
		if _, rerr := s.listTasks(t.Context(), &Exchange{UserID: "u"}, json.RawMessage(`{"cursor":"`+c+`"}`)); rerr == nil || rerr.Code != CodeInvalidParams {
			t.Errorf("cursor %q: %+v", c, rerr)
		}
	}
}

func TestDetailedTaskOfTheTasksExtension(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	boom := "remote said no"
	for _, c := range []struct {
		d              bus.TaskDetail
		status, result string
		inputRequests  bool
	}{
		{bus.TaskDetail{TaskItem: bus.TaskItem{Status: "submitted"}}, "working", "", false},
		{bus.TaskDetail{TaskItem: bus.TaskItem{Status: "input_required"}}, "input_required", "", true},
		{bus.TaskDetail{TaskItem: bus.TaskItem{Status: "completed"}, Result: json.RawMessage(`{"report":"r"}`)}, "completed", `"structuredContent":{"report":"r"},"isError":false`, false},
		// A failed task is a tool that failed: completed with isError.
		{bus.TaskDetail{TaskItem: bus.TaskItem{Status: "failed", Error: &boom}}, "completed", `The task failed: remote said no","type":"text"}],"isError":true`, false},
		{bus.TaskDetail{TaskItem: bus.TaskItem{Status: "cancelled"}}, "cancelled", "", false},
	} {
		c.d.TaskID, c.d.CreatedAt, c.d.UpdatedAt = "mcp-task-3", at, at
		got := detailedTask(c.d)
		raw, _ := json.Marshal(got)
		if got.Status != c.status || !strings.Contains(string(got.Result), c.result) || (c.result == "") != (got.Result == nil) ||
			(got.InputRequests != nil) != c.inputRequests || strings.Contains(string(raw), "related-task") ||
			!strings.Contains(string(raw), `"ttlMs":null`) || strings.Contains(string(raw), `"ttl"`) || strings.Contains(string(raw), `"pollInterval"`) {
			t.Errorf("detailedTask(%s) = %s", c.d.Status, raw)
		}
	}
}

func TestTasksExtensionIsDeclaredPerRequest(t *testing.T) {
	for params, want := range map[string]bool{
		`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`:   true,
		`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":true}}}}`: false,
		`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"tasks":{"io.modelcontextprotocol/tasks":{}}}}}`:        false,
		`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`:                                                    false,
		`{"task":{"ttl":1000}}`: false,
	} {
		if got := declaresTasks(json.RawMessage(params)); got != want {
			t.Errorf("declaresTasks(%s) = %v", params, got)
		}
	}
}

func TestModernTaskMethodsMirrorTheTaskIDInMcpName(t *testing.T) {
	msg := &Message{Method: "tasks/get", Params: json.RawMessage(`{"taskId":"mcp-task-1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)}
	if rerr := CheckHeaders(msg, Version20260728, "tasks/get", []string{"mcp-task-1"}); rerr != nil {
		t.Errorf("matching Mcp-Name: %v", rerr)
	}
	for _, name := range [][]string{nil, {"mcp-task-2"}} {
		if rerr := CheckHeaders(msg, Version20260728, "tasks/get", name); rerr == nil || rerr.Code != CodeHeaderMismatch {
			t.Errorf("Mcp-Name %v: %v", name, rerr)
		}
	}
}

func TestNativeTaskFailedWithoutAResultIsFailed(t *testing.T) {
	lost := "Remote MCP task was not found"
	d := bus.TaskDetail{TaskItem: bus.TaskItem{TaskID: "mcp-task-4", Status: "failed", Error: &lost}, ResultFormat: bus.ResultFormatCallToolResult}
	got := detailedTask(d)
	if got.Status != "failed" || got.Result != nil || got.Error == nil || got.Error.Code != CodeInternalError || got.Error.Message != lost {
		t.Errorf("native task failed without a result: %+v", got)
	}
	d.Result = json.RawMessage(`{"content":[{"type":"text","text":"no sources"}],"isError":true}`)
	if got := detailedTask(d); got.Status != "completed" || got.Error != nil || !strings.Contains(string(got.Result), `"isError":true`) {
		t.Errorf("native task failed with an isError result: %+v", got)
	}
}
