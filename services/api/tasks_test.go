package api_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestTaskRoutesForwardToThePoller(t *testing.T) {
	t.Parallel()
	e := start(t, testKeys())
	status, body := e.do(t, "GET", "/api/threads/th-1/mcp-tasks?limit=7", aliceKey, "")
	if status != 200 || !strings.Contains(fmt.Sprint(body["tasks"]), "task_id:alice/th-1/7") {
		t.Fatalf("list: %d %v", status, body)
	}
	for _, bad := range []string{"0", "101", "x"} {
		if status, body := e.do(t, "GET", "/api/threads/th-1/mcp-tasks?limit="+bad, aliceKey, ""); status != 422 || errCode(body) != "invalid_request" {
			t.Errorf("limit=%s: %d %v", bad, status, body)
		}
	}
	if status, body := e.do(t, "GET", "/api/threads/th-1/mcp-tasks/mcp-task-1", aliceKey, ""); status != 200 || body["status"] != "working" {
		t.Errorf("get: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", "/api/threads/th-1/mcp-tasks/mcp-task-2", aliceKey, ""); status != 404 || errCode(body) != "not_found" {
		t.Errorf("someone else's task: %d %v", status, body)
	}
	if status, body := e.do(t, "POST", "/api/threads/th-1/mcp-tasks/mcp-task-1/cancel", aliceKey, ""); status != 200 || body["status"] != "cancel:alice" {
		t.Errorf("cancel: %d %v", status, body)
	}
	if status, _ := e.do(t, "GET", "/api/threads/th-1/mcp-tasks", "", ""); status != 401 {
		t.Errorf("no key: %d", status)
	}
}
