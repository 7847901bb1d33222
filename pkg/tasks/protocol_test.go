package tasks_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func TestParseStatus(t *testing.T) {
	const tool, rid = "get_status", "r-1"
	long := strings.Repeat("x", 256)
	tests := []struct {
		name    string
		sc      string
		want    tasks.StatusReply
		wantErr string
	}{
		{"running", `{"task_id":"r-1","status":"running"}`, tasks.StatusReply{TaskID: rid, Status: "running"}, ""},
		{"extra keys ignored", `{"task_id":"r-1","status":"running","progress":3}`, tasks.StatusReply{TaskID: rid, Status: "running"}, ""},
		{"completed with result and artifact", `{"task_id":"r-1","status":"completed","result":{"a":1},"result_artifact":{"uri":"s3://x","mime_type":"text/plain"}}`,
			tasks.StatusReply{TaskID: rid, Status: "completed", Result: json.RawMessage(`{"a":1}`), ResultArtifact: json.RawMessage(`{"uri":"s3://x","mime_type":"text/plain"}`)}, ""},
		{"null fields are absent", `{"task_id":"r-1","status":"running","result":null,"error":null,"poll_after_seconds":null}`, tasks.StatusReply{TaskID: rid, Status: "running"}, ""},
		{"poll after", `{"task_id":"r-1","status":"running","poll_after_seconds":2.5}`, tasks.StatusReply{TaskID: rid, Status: "running", PollAfter: 2500 * time.Millisecond}, ""},
		{"poll after capped at 24h", `{"task_id":"r-1","status":"running","poll_after_seconds":1e9}`, tasks.StatusReply{TaskID: rid, Status: "running", PollAfter: 24 * time.Hour}, ""},
		{"task_not_found fails", `{"task_id":"r-1","status":"running","error_code":"task_not_found"}`,
			tasks.StatusReply{TaskID: rid, Status: "failed", ErrorCode: "task_not_found", Error: "Remote MCP task was not found"}, ""},
		{"task_not_found keeps its error", `{"task_id":"r-1","status":"failed","error_code":"task_not_found","error":"gone"}`,
			tasks.StatusReply{TaskID: rid, Status: "failed", ErrorCode: "task_not_found", Error: "gone"}, ""},
		{"input required", `{"task_id":"r-1","status":"input_required","input_required":{"q":"?"}}`,
			tasks.StatusReply{TaskID: rid, Status: "input_required", InputRequired: json.RawMessage(`{"q":"?"}`)}, ""},

		{"missing", ``, tasks.StatusReply{}, "MCP task tool 'get_status' must return structuredContent; text content is not parsed"},
		{"null", `null`, tasks.StatusReply{}, "MCP task tool 'get_status' must return structuredContent; text content is not parsed"},
		{"not an object", `[1]`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': structuredContent must be a JSON object"},
		{"no task id", `{"status":"running"}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': task_id must be a non-empty string"},
		{"task id not a string", `{"task_id":7,"status":"running"}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': task_id must be a non-empty string"},
		{"task id too long", `{"task_id":"` + long + `","status":"running"}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': task_id must not exceed 255 characters"},
		{"unknown status", `{"task_id":"r-1","status":"paused"}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': status must be one of running, input_required, completed, failed, cancelled"},
		{"task id mismatch", `{"task_id":"r-2","status":"running"}`, tasks.StatusReply{}, "MCP task response task_id does not match the persisted remote task: expected 'r-1', got 'r-2'"},
		{"input required without object", `{"task_id":"r-1","status":"input_required"}`, tasks.StatusReply{}, "Invalid structuredContent: input_required status requires input_required"},
		{"input required not an object", `{"task_id":"r-1","status":"input_required","input_required":"?"}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': input_required must be an object"},
		{"zero poll after", `{"task_id":"r-1","status":"running","poll_after_seconds":0}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': poll_after_seconds must be a positive finite number"},
		{"negative poll after", `{"task_id":"r-1","status":"running","poll_after_seconds":-1}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': poll_after_seconds must be a positive finite number"},
		{"overflowing poll after", `{"task_id":"r-1","status":"running","poll_after_seconds":1e400}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': poll_after_seconds must be a positive finite number"},
		{"string poll after", `{"task_id":"r-1","status":"running","poll_after_seconds":"5"}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': poll_after_seconds must be a positive finite number"},
		{"artifact without uri", `{"task_id":"r-1","status":"completed","result_artifact":{"mime_type":"a/b"}}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': result_artifact must be an object with non-empty uri and mime_type"},
		{"artifact empty mime", `{"task_id":"r-1","status":"completed","result_artifact":{"uri":"u","mime_type":""}}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': result_artifact must be an object with non-empty uri and mime_type"},
		{"error not a string", `{"task_id":"r-1","status":"failed","error":{"x":1}}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': error must be a string"},
		{"error code not a string", `{"task_id":"r-1","status":"failed","error_code":1}`, tasks.StatusReply{}, "Invalid structuredContent from MCP task tool 'get_status': error_code must be a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.ParseStatus(tool, rid, json.RawMessage(tc.sc))
			if tc.wantErr != "" {
				var pe *tasks.ProtocolError
				if !errors.As(err, &pe) || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want protocol error %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := render(got), render(tc.want); g != w {
				t.Fatalf("got  %s\nwant %s", g, w)
			}
		})
	}
}

func render(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestParseSubmit(t *testing.T) {
	tests := []struct {
		name, sc, wantID, wantErr string
	}{
		{"ok", `{"task_id":"remote-123","status":"running"}`, "remote-123", ""},
		{"extra keys", `{"task_id":"remote-123","status":"running","eta":5}`, "remote-123", ""},
		{"text only", ``, "", "MCP task tool 'submit' must return structuredContent; text content is not parsed"},
		{"empty id", `{"task_id":"","status":"running"}`, "", "Invalid structuredContent from MCP task tool 'submit': task_id must be a non-empty string"},
		{"other status", `{"task_id":"r","status":"completed"}`, "", `Invalid structuredContent from MCP task tool 'submit': submit status must be "running"`},
		{"id too long", `{"task_id":"` + strings.Repeat("r", 256) + `","status":"running"}`, "", "MCP task remote_task_id must not exceed 255 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.ParseSubmit("submit", json.RawMessage(tc.sc))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.RemoteTaskID != tc.wantID {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestParseCancel(t *testing.T) {
	tests := []struct {
		name, sc, wantStatus, wantErr string
	}{
		{"cancelled", `{"task_id":"r","status":"cancelled"}`, "cancelled", ""},
		{"completed with result", `{"task_id":"r","status":"completed","result":1}`, "completed", ""},
		{"failed", `{"task_id":"r","status":"failed","error":"x"}`, "failed", ""},
		{"not found is failed", `{"task_id":"r","status":"running","error_code":"task_not_found"}`, "failed", ""},
		{"non-terminal", `{"task_id":"r","status":"running"}`, "", "MCP task cancellation must return a terminal status"},
		{"input required", `{"task_id":"r","status":"input_required","input_required":{}}`, "", "MCP task cancellation must return a terminal status"},
		{"mismatch", `{"task_id":"q","status":"cancelled"}`, "", "MCP task response task_id does not match the persisted remote task: expected 'r', got 'q'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.ParseCancel("cancel", "r", json.RawMessage(tc.sc))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Status != tc.wantStatus {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestToolErrorFromContent(t *testing.T) {
	block := func(typ, text string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"type": typ, "text": text})
		return b
	}
	tests := []struct {
		name    string
		content []json.RawMessage
		want    string
	}{
		{"no content", nil, "MCP task tool 'st' returned an error"},
		{"first non-empty text, stripped", []json.RawMessage{block("image", "x"), block("text", "   "), block("text", "  busy \n"), block("text", "later")},
			"MCP task tool 'st' returned an error: busy"},
		{"snippet capped at 500 characters", []json.RawMessage{block("text", strings.Repeat("é", 600))},
			"MCP task tool 'st' returned an error: " + strings.Repeat("é", 500)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tasks.ToolErrorFromContent("st", tc.content).Error(); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLocalStatusAndDriverData(t *testing.T) {
	for remote, local := range map[string]string{"running": "working", "input_required": "input_required",
		"completed": "completed", "failed": "failed", "cancelled": "cancelled"} {
		if got := tasks.LocalStatus(remote); got != local {
			t.Errorf("LocalStatus(%s) = %s, want %s", remote, got, local)
		}
	}
	dd := tasks.DriverData{SubmitTool: "s", StatusTool: "st", CancelTool: "c"}.Marshal()
	if tool, err := tasks.ToolFor(dd, tasks.RoleStatus); err != nil || tool != "st" {
		t.Fatalf("ToolFor status = %q, %v", tool, err)
	}
	_, err := tasks.ToolFor(json.RawMessage(`{"status_tool":"st"}`), tasks.RoleCancel)
	if err == nil || err.Error() != "Task driver_data is missing required 'cancel_tool'" {
		t.Fatalf("missing role: %v", err)
	}
	if got := tasks.UnknownDriverError("legacy").Error(); got != "No MCP task driver registered as 'legacy'" {
		t.Fatalf("unknown driver: %q", got)
	}
}
