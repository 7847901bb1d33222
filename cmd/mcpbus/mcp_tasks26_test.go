package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// modernTaskClient sends hand-written 2026-07-28 requests to /mcp as one
// user in one thread, declaring the tasks extension unless told not to.
type modernTaskClient struct {
	t              *testing.T
	base, key      string
	thread         string
	withoutTasks   bool
	nameMismatched bool
}

var modernTaskIDs atomic.Int64

// modernRPCReply is a JSON-RPC response.
type modernRPCReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// send posts method with params (plus the per-request _meta) and returns
// the HTTP status and the response (read from JSON or the SSE stream).
func (c modernTaskClient) send(method string, params map[string]any) (int, modernRPCReply) {
	c.t.Helper()
	caps := map[string]any{}
	if !c.withoutTasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": modernTaskIDs.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.base+"/mcp", bytes.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + c.key, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcpbus-Thread-Id": c.thread} {
		req.Header.Set(k, v)
	}
	name, _ := params["name"].(string)
	if id, ok := params["taskId"].(string); ok {
		name = id
	}
	if c.nameMismatched {
		name += "-not-it"
	}
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var reply modernRPCReply
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m struct {
				modernRPCReply
				ID json.RawMessage `json:"id"`
			}
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &m) == nil && m.ID != nil {
				reply = m.modernRPCReply
			}
		}
	} else {
		_ = json.NewDecoder(resp.Body).Decode(&reply)
	}
	return resp.StatusCode, reply
}

// listen opens a subscriptions/listen stream with the notifications
// filter and returns its notifications/tasks params once acknowledged.
func (c modernTaskClient) listen(filter map[string]any) <-chan map[string]any {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": modernTaskIDs.Add(1), "method": "subscriptions/listen", "params": map[string]any{
		"notifications": filter, "_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}}})
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/mcp", bytes.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + c.key, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Mcpbus-Thread-Id": c.thread} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		c.t.Fatalf("subscriptions/listen: HTTP %d", resp.StatusCode)
	}
	acked, out := make(chan struct{}), make(chan map[string]any, 16)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var n struct {
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			}
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || json.Unmarshal([]byte(data), &n) != nil {
				continue
			}
			switch n.Method {
			case "notifications/subscriptions/acknowledged":
				close(acked)
			case "notifications/tasks":
				out <- n.Params
			}
		}
	}()
	testkit.Receive(c.t, 60*time.Second, "the listen acknowledgement", acked)
	return out
}

// result is send that must succeed.
func (c modernTaskClient) result(method string, params map[string]any) map[string]any {
	c.t.Helper()
	status, reply := c.send(method, params)
	if status != http.StatusOK || reply.Error != nil {
		c.t.Fatalf("%s %v: HTTP %d, %+v", method, params, status, reply.Error)
	}
	var out map[string]any
	if err := json.Unmarshal(reply.Result, &out); err != nil {
		c.t.Fatalf("%s result %s: %v", method, reply.Result, err)
	}
	return out
}

// rpcError is send that must fail with a JSON-RPC error; it returns the
// code.
func (c modernTaskClient) rpcError(method string, params map[string]any) int {
	c.t.Helper()
	_, reply := c.send(method, params)
	if reply.Error == nil {
		c.t.Fatalf("%s %v: succeeded with %s", method, params, reply.Result)
	}
	return reply.Error.Code
}

// create calls tool, which must answer with a CreateTaskResult, and
// returns its task id.
func (c modernTaskClient) create(tool string, args map[string]any) string {
	c.t.Helper()
	res := c.result("tools/call", map[string]any{"name": tool, "arguments": args})
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || !strings.HasPrefix(id, "mcp-task-") || res["status"] != "working" || res["task"] != nil {
		c.t.Fatalf("%s: not a CreateTaskResult naming mcpbus's task: %v", tool, res)
	}
	if ttl, ok := res["ttlMs"]; !ok || ttl != nil || res["pollIntervalMs"] != float64(2000) {
		c.t.Errorf("%s: ttlMs %v (want null), pollIntervalMs %v", tool, res["ttlMs"], res["pollIntervalMs"])
	}
	return id
}

// terminal polls tasks/get until the task is terminal and returns it.
func (c modernTaskClient) terminal(id string) map[string]any {
	c.t.Helper()
	var task map[string]any
	testkit.Eventually(c.t, 90*time.Second, "task "+id+" to be terminal", func() bool {
		task = c.result("tasks/get", map[string]any{"taskId": id})
		s := task["status"]
		return s == "completed" || s == "failed" || s == "cancelled"
	})
	if task["resultType"] != "complete" || task["taskId"] != id {
		c.t.Errorf("tasks/get: %v", task)
	}
	return task
}

// TestMCPTasksExtensionOverARealStack runs `mcpbus dev` in front of the
// demo server in -era modern over HTTP (its report toolset and its
// research tool with native tasks in the 2026-07-28 tasks extension),
// and the same demo over stdio, and
// drives /mcp with hand-written 2026-07-28 requests declaring the
// extension: server/discover advertises it; a task-toolset submit and the
// upstream's native task tool answer with a CreateTaskResult naming
// mcpbus's task; tasks/get follows each until it inlines the result (the
// native one followed upstream with the extension's tasks/get); a failing
// native task is completed with isError; tasks/cancel is acknowledged and
// the cancel reaches the upstream; another user's task, or the same
// user's from another thread, is an unknown task; tasks/result and
// tasks/list are method not found, the task methods without the extension
// -32021, a mismatched Mcp-Name 400 -32020; a call without the extension
// answers at once, except a task-only tool's: -32021. A 2025-11-25 session gets the modern
// upstream's native task through the legacy task protocol.
func TestMCPTasksExtensionOverARealStack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-modern", demoBin, "-transport", "http", "-addr", demoAddr, "-era", "modern")
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"modhttp": {"type": "http", "url": "http://%s/mcp", "task_toolsets": [
		{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]},
		"modstdio": {"type": "stdio", "command": %q, "args": ["-era", "modern"]}}}`, demoAddr, demoBin)
	settings := fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
mcp_tasks:
  enabled: true
  poll_interval_seconds: 1
`, apiAddr, sha(mcpAliceKey), sha(mcpBobKey))
	dev := startDevIn(t, dir, ext, settings)
	t.Cleanup(func() { dev.stop(t) })
	thread := fmt.Sprintf("tasks26-%d", time.Now().UnixNano())
	alice := modernTaskClient{t: t, base: "http://" + apiAddr, key: mcpAliceKey, thread: thread}

	disc := alice.result("server/discover", map[string]any{})
	caps, _ := disc["capabilities"].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	if _, ok := exts["io.modelcontextprotocol/tasks"]; !ok || caps["tasks"] != nil {
		t.Errorf("server/discover capabilities: %v", caps)
	}
	var tools []any
	testkit.Eventually(t, 60*time.Second, "the modern demo's tools in alice's catalog", func() bool {
		tools, _ = alice.result("tools/list", map[string]any{})["tools"].([]any)
		return strings.Contains(fmt.Sprint(tools), "modhttp_research_stats") && strings.Contains(fmt.Sprint(tools), "modhttp_submit_report") &&
			strings.Contains(fmt.Sprint(tools), "modstdio_research")
	})
	for _, tl := range tools {
		m := tl.(map[string]any)
		if m["name"] == "modhttp_research" || m["name"] == "modhttp_submit_report" {
			if ex, _ := m["execution"].(map[string]any); ex["taskSupport"] != "optional" {
				t.Errorf("%s execution = %v, want taskSupport optional", m["name"], m["execution"])
			}
		}
	}

	// A task-toolset submit and a native task of the 2026-07-28 upstream.
	report := alice.create("modhttp_submit_report", map[string]any{"topic": "tides", "steps": 2})
	research := alice.create("modhttp_research", map[string]any{"topic": "tides", "steps": 2})
	failing := alice.create("modhttp_research", map[string]any{"topic": "nothing", "fail": true})
	long := alice.create("modhttp_research", map[string]any{"topic": "forever", "steps": 1000})
	overStdio := alice.create("modstdio_research", map[string]any{"topic": "pipes", "steps": 3})
	longOverStdio := alice.create("modstdio_research", map[string]any{"topic": "forever", "steps": 1000})
	for id, want := range map[string]string{report: "tides", research: `"sources":2`, overStdio: `"sources":3`} {
		task := alice.terminal(id)
		res, _ := json.Marshal(task["result"])
		if task["status"] != "completed" || !strings.Contains(string(res), want) || strings.Contains(string(res), "related-task") || strings.Contains(string(res), `"isError":true`) {
			t.Errorf("task %s: %v", id, task)
		}
	}
	if task := alice.terminal(failing); task["status"] != "completed" || !strings.Contains(fmt.Sprint(task["result"]), "isError:true") ||
		!strings.Contains(fmt.Sprint(task["statusMessage"]), "no sources") {
		t.Errorf("failing native task: %v", task)
	}

	// Ownership: bob, and alice in another thread, know nothing of it.
	bob := modernTaskClient{t: t, base: alice.base, key: mcpBobKey, thread: thread}
	elsewhere := modernTaskClient{t: t, base: alice.base, key: mcpAliceKey, thread: thread + "-other"}
	for who, c := range map[string]modernTaskClient{"bob": bob, "alice elsewhere": elsewhere} {
		for _, method := range []string{"tasks/get", "tasks/cancel"} {
			if code := c.rpcError(method, map[string]any{"taskId": long}); code != -32602 {
				t.Errorf("%s: %s of alice's task = %d, want -32602 (unknown task)", who, method, code)
			}
		}
	}
	if code := alice.rpcError("tasks/update", map[string]any{"taskId": "mcp-task-nope", "inputResponses": map[string]any{}}); code != -32602 {
		t.Errorf("tasks/update of an unknown task = %d", code)
	}
	if ack := alice.result("tasks/update", map[string]any{"taskId": long, "inputResponses": map[string]any{}}); ack["resultType"] != "complete" || ack["taskId"] != nil {
		t.Errorf("tasks/update ack: %v", ack)
	}

	// Cancel: acknowledged, and the upstream's task ends cancelled, which
	// a subscriptions/listen naming the task hears as notifications/tasks.
	notes := alice.listen(map[string]any{"taskIds": []string{long, research}})
	if ack := alice.result("tasks/cancel", map[string]any{"taskId": long}); ack["resultType"] != "complete" || ack["taskId"] != nil || ack["status"] != nil {
		t.Errorf("tasks/cancel ack: %v", ack)
	}
	if task := alice.terminal(long); task["status"] != "cancelled" {
		t.Errorf("cancelled task: %v", task)
	}
	// Over stdio the cancel reaches the thread's process (the poller
	// stores cancelled only once the upstream's task says so).
	alice.result("tasks/cancel", map[string]any{"taskId": longOverStdio})
	if task := alice.terminal(longOverStdio); task["status"] != "cancelled" {
		t.Errorf("cancelled stdio task: %v", task)
	}
	note := testkit.Receive(t, 60*time.Second, "notifications/tasks of the cancelled task", notes)
	if note["taskId"] != long || note["status"] != "cancelled" || !strings.Contains(fmt.Sprint(note["_meta"]), "io.modelcontextprotocol/subscriptionId") {
		t.Errorf("notifications/tasks: %v", note)
	}
	stats := alice.result("tools/call", map[string]any{"name": "modhttp_research_stats", "arguments": map[string]any{}})
	if sc, _ := stats["structuredContent"].(map[string]any); sc["cancelled"] != float64(1) || sc["created"] != float64(3) {
		t.Errorf("the upstream's research stats: %v", stats["structuredContent"])
	}
	// Terminal: acknowledged again, unchanged.
	if ack := alice.result("tasks/cancel", map[string]any{"taskId": research}); ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel of a completed task: %v", ack)
	}

	// What the extension does not have, and requests that do not declare it.
	for _, method := range []string{"tasks/result", "tasks/list"} {
		if code := alice.rpcError(method, map[string]any{"taskId": research}); code != -32601 {
			t.Errorf("%s = %d, want -32601", method, code)
		}
	}
	plain := modernTaskClient{t: t, base: alice.base, key: mcpAliceKey, thread: thread, withoutTasks: true}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if code := plain.rpcError(method, map[string]any{"taskId": research}); code != -32021 {
			t.Errorf("%s without the extension = %d, want -32021", method, code)
		}
	}
	if res := plain.result("tools/call", map[string]any{"name": "modhttp_research", "arguments": map[string]any{"topic": "now"}}); res["resultType"] != "complete" ||
		!strings.Contains(fmt.Sprint(res["structuredContent"]), "sources:2") {
		t.Errorf("research without the extension: %v", res)
	}
	// A 2025-11-25 session in front of the same upstream: the native task
	// of the modern server through the legacy task protocol.
	legacy := newTaskClient(t, alice.base, mcpAliceKey, thread)
	initialized(t, legacy.c, "2025-11-25")
	raw, rerr := legacy.send("tools/call", map[string]any{"name": "modhttp_research", "arguments": map[string]any{"topic": "eras", "steps": 2}, "task": map[string]any{"ttl": 60000}})
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if rerr != nil || json.Unmarshal(raw, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("legacy task-augmented call: %s %+v", raw, rerr)
	}
	if raw, rerr := legacy.send("tasks/result", map[string]any{"taskId": created.Task.TaskID}); rerr != nil || !strings.Contains(string(raw), `"sources":2`) {
		t.Errorf("legacy tasks/result: %s %+v", raw, rerr)
	}

	// A task-only upstream tool: -32021 naming its server without the
	// extension (nothing is made), a task with it.
	_, reply := plain.send("tools/call", map[string]any{"name": "modhttp_deep_research", "arguments": map[string]any{"topic": "x"}})
	if reply.Error == nil || reply.Error.Code != -32021 || !strings.Contains(reply.Error.Message, "'modhttp'") {
		t.Errorf("task-only tool without the extension: %+v", reply.Error)
	}
	if task := alice.terminal(alice.create("modhttp_deep_research", map[string]any{"topic": "deep", "steps": 1})); task["status"] != "completed" {
		t.Errorf("deep_research task: %v", task)
	}

	mismatched := alice
	mismatched.nameMismatched = true
	if status, reply := mismatched.send("tasks/get", map[string]any{"taskId": research}); status != http.StatusBadRequest || reply.Error == nil || reply.Error.Code != -32020 {
		t.Errorf("tasks/get with a mismatched Mcp-Name: %d %+v", status, reply.Error)
	}
}
