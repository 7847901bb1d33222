package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
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

func TestTaskListOverEveryThread(t *testing.T) {
	t.Parallel()
	e := start(t, testKeys())
	// The poller gets thread_id "" (every thread) and the caller's user.
	status, body := e.do(t, "GET", "/api/mcp/tasks?limit=9", aliceKey, "")
	if status != 200 || !strings.Contains(fmt.Sprint(body["tasks"]), "task_id:alice//9") {
		t.Fatalf("list over every thread: %d %v", status, body)
	}
	if status, body := e.do(t, "GET", "/api/mcp/tasks?limit=0", aliceKey, ""); status != 422 || errCode(body) != "invalid_request" {
		t.Errorf("limit=0: %d %v", status, body)
	}
	if status, _ := e.do(t, "GET", "/api/mcp/tasks", "", ""); status != 401 {
		t.Errorf("without a key: %d", status)
	}
}

// taskStream opens GET /api/mcp/tasks/stream as key and returns its
// events as they arrive, once the stream said it is ready.
func taskStream(t *testing.T, e *env, key string) <-chan bus.TaskEventMessage {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", e.base+"/api/mcp/tasks/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("task stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), ": following task events") {
		t.Fatalf("task stream did not say it is ready: %q", lines.Text())
	}
	out := make(chan bus.TaskEventMessage, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		for lines.Scan() {
			if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				var ev bus.TaskEventMessage
				if json.Unmarshal([]byte(d), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return out
}

// TestTaskEventsStreamIsPerUser: the task event stream carries the
// caller's own tasks over every thread and never another user's (a user
// who listens while bob's task ends gets only her own event); an admin
// gets everyone's.
func TestTaskEventsStreamIsPerUser(t *testing.T) {
	t.Parallel()
	e := start(t, testKeys())
	alice, root := taskStream(t, e, aliceKey), taskStream(t, e, adminKey)
	pub := e.bus.Connect(t)
	publish := func(user, thread, id string) {
		body, _ := json.Marshal(bus.TaskEventMessage{TaskEvent: bus.TaskEvent{TaskID: id, TaskName: "report", Status: "completed"},
			UserID: user, ThreadID: thread, EventVersion: 1})
		if err := pub.Publish(e.bus.Names.TaskEvents(thread), body); err != nil {
			t.Fatal(err)
		}
	}
	// Bob's first, from one publisher: were it sent to alice, it would
	// come before her own.
	publish("bob", "th-b", "mcp-task-bob")
	publish("alice", "th-1", "mcp-task-a1")
	publish("alice", "th-2", "mcp-task-a2")
	for _, want := range []string{"mcp-task-a1", "mcp-task-a2"} {
		ev := <-alice
		if ev.TaskID != want || ev.UserID != "alice" {
			t.Fatalf("alice's stream: got %+v, want %s", ev, want)
		}
	}
	for _, want := range []string{"mcp-task-bob", "mcp-task-a1", "mcp-task-a2"} {
		if ev := <-root; ev.TaskID != want {
			t.Fatalf("the admin's stream: got %+v, want %s", ev, want)
		}
	}
	if status, _ := e.do(t, "GET", "/api/mcp/tasks/stream", "", ""); status != 401 {
		t.Errorf("without a key: %d", status)
	}
}
