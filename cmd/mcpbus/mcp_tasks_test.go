package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// taskClient is an mcp-go streamable HTTP client of one api replica, as a
// user, in a named thread.
type taskClient struct {
	t *testing.T
	c *client.Client
}

var taskRequestIDs atomic.Int64

func newTaskClient(t *testing.T, base, key, thread string, opts ...transport.StreamableHTTPCOption) *taskClient {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", append(opts, transport.WithHTTPHeaders(map[string]string{
		"Authorization": "Bearer " + key, "Mcpbus-Thread-Id": thread}))...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &taskClient{t: t, c: c}
}

// send makes one raw request (the task-augmented tools/call has no typed
// client method, and a client reusing another replica's session has not
// initialized) and returns its result or JSON-RPC error.
func (tc *taskClient) send(method string, params any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp, err := tc.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0",
		ID: mcp.NewRequestId(taskRequestIDs.Add(1)), Method: method, Params: params})
	if err != nil {
		tc.t.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

func (tc *taskClient) task(method, id string) (mcp.Task, *mcp.JSONRPCErrorDetails) {
	tc.t.Helper()
	raw, rerr := tc.send(method, map[string]any{"taskId": id})
	var task mcp.Task
	if rerr == nil {
		if err := json.Unmarshal(raw, &task); err != nil {
			tc.t.Fatalf("%s result %s: %v", method, raw, err)
		}
	}
	return task, rerr
}

// submit makes a task-augmented call of the demo's report tool.
func (tc *taskClient) submit(topic string, steps int) mcp.Task {
	tc.t.Helper()
	raw, rerr := tc.send("tools/call", map[string]any{"name": "demohttp_submit_report",
		"arguments": map[string]any{"topic": topic, "steps": steps}, "task": map[string]any{"ttl": 60000}})
	if rerr != nil {
		tc.t.Fatalf("task-augmented tools/call: %d %s", rerr.Code, rerr.Message)
	}
	var ctr mcp.CreateTaskResult
	if err := json.Unmarshal(raw, &ctr); err != nil || ctr.Task.TaskId == "" {
		tc.t.Fatalf("CreateTaskResult %s: %v", raw, err)
	}
	return ctr.Task
}

// TestMCPTasksAcrossAPIReplicas runs a deployment with two api replicas
// (one process per service, machine NATS in a fresh namespace, PostgreSQL)
// and the demo server's report toolset, and drives MCP's task protocol
// with mcp-go clients: a task-augmented tools/call through replica A is a
// CreateTaskResult naming mcpbus's task id; tasks/get on A follows it;
// tasks/result sent to replica B in A's session blocks until the durable
// task completes and returns the report; tasks/cancel ends a long task on
// its server (the demo's state says cancelled); tasks/list pages the
// thread's tasks; and bob, in alice's thread, cannot see, wait for or
// cancel alice's task.
func TestMCPTasksAcrossAPIReplicas(t *testing.T) {
	t.Parallel()
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dbURL := testSchema(t)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "demo-state")
	if err := os.Mkdir(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startDemo := func() *process {
		return startProcess(t, dir, "demo-http", demoBin, "-transport", "http", "-addr", demoAddr, "-state-dir", stateDir)
	}
	demo := startDemo()
	apiA, apiB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"demohttp": {"type": "http", "url": "http://%s/mcp", "task_toolsets": [
		{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}}}`, demoAddr)
	settings := natsSettings(natsURL, names) + fmt.Sprintf(`database:
  backend: postgres
  url: %q
api:
  listen: %s
  mcp:
    page_size: 2
  keys:
    - {sha256: %s, user_id: alice, role: user}
    - {sha256: %s, user_id: bob, role: user}
mcp_tasks:
  enabled: true
  poll_interval_seconds: 1
`, dbURL, apiA, sha(mcpAliceKey), sha(mcpBobKey))
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startServices := func() []*process {
		var procs []*process
		for _, svc := range []string{"tokens", "discovery", "toolcall", "taskpoller", "api"} {
			procs = append(procs, startProcess(t, dir, svc, mcpbusBin, "serve", svc))
		}
		procs = append(procs, startProcessEnv(t, dir, "api-b", []string{"MCPBUS_API_LISTEN=" + apiB}, mcpbusBin, "serve", "api"))
		waitHealthy(t, natsURL, names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI)
		for _, addr := range []string{apiA, apiB} {
			testkit.Eventually(t, 60*time.Second, "api "+addr+" to listen", func() bool {
				resp, err := http.Get("http://" + addr + "/mcp")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return true
			})
		}
		return procs
	}
	procs := startServices()

	thread := fmt.Sprintf("mcp-tasks-%d", time.Now().UnixNano())
	alice := newTaskClient(t, "http://"+apiA, mcpAliceKey, thread, transport.WithContinuousListening())
	statuses := make(chan mcp.Task, 64)
	alice.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/tasks/status" {
			return
		}
		raw, _ := json.Marshal(n.Params.AdditionalFields)
		var task mcp.Task
		if json.Unmarshal(raw, &task) == nil {
			select {
			case statuses <- task:
			default:
			}
		}
	})
	init := initialized(t, alice.c, mcp.ProtocolVersion20251125)
	if init.Capabilities.Tasks == nil || init.Capabilities.Tasks.Requests == nil || init.Capabilities.Tasks.Requests.Tools == nil || init.Capabilities.Tasks.Requests.Tools.Call == nil ||
		init.Capabilities.Tasks.List == nil || init.Capabilities.Tasks.Cancel == nil {
		t.Fatalf("initialize capabilities lack tasks: %+v", init.Capabilities)
	}
	var submit *mcp.Tool
	testkit.Eventually(t, 60*time.Second, "the report toolset in alice's catalog", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := alice.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return false
		}
		for i := range res.Tools {
			if res.Tools[i].Name == "demohttp_submit_report" {
				submit = &res.Tools[i]
			}
		}
		return submit != nil
	})
	if submit.Execution == nil || submit.Execution.TaskSupport != mcp.TaskSupportOptional {
		t.Errorf("submit tool execution = %+v, want taskSupport optional", submit.Execution)
	}

	// A task-augmented call is a CreateTaskResult with mcpbus's task id.
	created := alice.submit("otters", 3)
	if !strings.HasPrefix(created.TaskId, "mcp-task-") || created.Status != mcp.TaskStatusWorking || created.CreatedAt == "" || created.TTL != nil {
		t.Fatalf("created task = %+v", created)
	}
	// A plain call of a tool that is not task-capable, as a task: -32601.
	if _, rerr := alice.send("tools/call", map[string]any{"name": "demohttp_echo", "arguments": map[string]any{"message": "x"},
		"task": map[string]any{}}); rerr == nil || rerr.Code != -32601 {
		t.Errorf("task-augmented call of a plain tool: %+v", rerr)
	}

	// tasks/result through replica B, in alice's session (read from the
	// KV there), waits for the poller to complete the task.
	sid := alice.c.GetSessionId()
	aliceB := newTaskClient(t, "http://"+apiB, mcpAliceKey, thread, transport.WithSession(sid))
	raw, rerr := aliceB.send("tasks/result", map[string]any{"taskId": created.TaskId})
	if rerr != nil {
		t.Fatalf("tasks/result on replica B: %d %s", rerr.Code, rerr.Message)
	}
	var result struct {
		Content           []mcp.TextContent `json:"content"`
		StructuredContent map[string]any    `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              map[string]any    `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &result); err != nil {
		t.Fatal(err)
	}
	if result.IsError || result.StructuredContent["report"] != "Report on otters: 3 steps done." || len(result.Content) != 1 ||
		!strings.Contains(result.Content[0].Text, "Report on otters") {
		t.Fatalf("tasks/result = %s", raw)
	}
	if rt, _ := result.Meta["io.modelcontextprotocol/related-task"].(map[string]any); rt["taskId"] != created.TaskId {
		t.Errorf("tasks/result _meta = %v", result.Meta)
	}
	// The completion reached alice's GET stream on A as
	// notifications/tasks/status (from the poller's JetStream event).
	awaitTaskStatus(t, statuses, created.TaskId, mcp.TaskStatusCompleted)
	// tasks/get on A now says completed, and a terminal task is not
	// cancelled again (-32602).
	if got, rerr := alice.task("tasks/get", created.TaskId); rerr != nil || got.Status != mcp.TaskStatusCompleted || got.TaskId != created.TaskId {
		t.Fatalf("tasks/get after completion = %+v %+v", got, rerr)
	}
	if _, rerr := alice.task("tasks/cancel", created.TaskId); rerr == nil || rerr.Code != -32602 || !strings.Contains(rerr.Message, "completed") {
		t.Errorf("tasks/cancel of a completed task: %+v", rerr)
	}

	// A long task: tasks/get shows it working, tasks/cancel (on B) ends it
	// on the demo server, and tasks/result then says cancelled.
	long := alice.submit("slow", 1000)
	if got, rerr := alice.task("tasks/get", long.TaskId); rerr != nil || got.Status != mcp.TaskStatusWorking || got.PollInterval == nil {
		t.Fatalf("tasks/get of the long task = %+v %+v", got, rerr)
	}

	// bob, in the same thread, knows alice's task id: every task method
	// answers as for an unknown task, and his list is empty.
	bob := newTaskClient(t, "http://"+apiB, mcpBobKey, thread)
	initialized(t, bob.c, mcp.ProtocolVersion20251125)
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		_, rerr := bob.task(method, long.TaskId)
		if rerr == nil || rerr.Code != -32602 || rerr.Message != "Failed to retrieve task: Task not found" {
			t.Errorf("bob's %s of alice's task: %+v", method, rerr)
		}
	}
	if _, rerr := bob.task("tasks/get", "mcp-task-00000000000000000000000000000000"); rerr == nil || rerr.Message != "Failed to retrieve task: Task not found" {
		t.Errorf("tasks/get of a task that does not exist: %+v", rerr)
	}
	raw, rerr = bob.send("tasks/list", map[string]any{})
	if rerr != nil || strings.Contains(string(raw), "mcp-task-") {
		t.Errorf("bob's tasks/list = %s %+v", raw, rerr)
	}
	if got, rerr := alice.task("tasks/get", long.TaskId); rerr != nil || got.Status != mcp.TaskStatusWorking || strings.Contains(got.StatusMessage, "ancel") {
		t.Fatalf("alice's task after bob's attempts = %+v %+v", got, rerr)
	}

	cancelled, rerr := aliceB.task("tasks/cancel", long.TaskId)
	if rerr != nil || cancelled.Status != mcp.TaskStatusCancelled {
		t.Fatalf("tasks/cancel = %+v %+v", cancelled, rerr)
	}
	// The poller reached the demo server's cancel tool: its state says so.
	remote := demoTasks(t, stateDir)
	if remote["slow"] != "cancelled" || remote["otters"] != "completed" {
		t.Errorf("demo server task states = %v", remote)
	}
	raw, rerr = alice.send("tasks/result", map[string]any{"taskId": long.TaskId})
	if rerr != nil || !strings.Contains(string(raw), `"isError":true`) || !strings.Contains(string(raw), "cancelled") {
		t.Errorf("tasks/result of the cancelled task = %s %+v", raw, rerr)
	}

	// tasks/list in pages of two (the api's page size), newest first.
	third := alice.submit("third", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	page, err := alice.c.ListTasksByPage(ctx, mcp.ListTasksRequest{})
	if err != nil || len(page.Tasks) != 2 || page.NextCursor == "" || page.Tasks[0].TaskId != third.TaskId || page.Tasks[1].TaskId != long.TaskId {
		t.Fatalf("tasks/list first page = %+v %v", page, err)
	}
	all, err := alice.c.ListTasks(ctx, mcp.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range all.Tasks {
		ids = append(ids, tk.TaskId)
	}
	if !slices.Equal(ids, []string{third.TaskId, long.TaskId, created.TaskId}) {
		t.Errorf("tasks/list over every page = %v", ids)
	}
	if _, rerr := alice.send("tasks/list", map[string]any{"cursor": "not-a-cursor"}); rerr == nil || rerr.Code != -32602 {
		t.Errorf("tasks/list with a forged cursor: %+v", rerr)
	}

	// A 2025-06-18 session is offered no tasks: params.task is ignored and
	// the call is today's plain call (the task handle as text).
	old := newTaskClient(t, "http://"+apiA, mcpAliceKey, thread)
	if res := initialized(t, old.c, mcp.ProtocolVersion20250618); res.Capabilities.Tasks != nil {
		t.Errorf("2025-06-18 capabilities offer tasks: %+v", res.Capabilities.Tasks)
	}
	raw, rerr = old.send("tools/call", map[string]any{"name": "demohttp_submit_report",
		"arguments": map[string]any{"topic": "old", "steps": 1}, "task": map[string]any{}})
	if rerr != nil || !strings.Contains(string(raw), `"content"`) || !strings.Contains(string(raw), `task_id`) || strings.Contains(string(raw), `"taskId"`) {
		t.Errorf("task-augmented call in a 2025-06-18 session = %s %+v", raw, rerr)
	}

	// A task-augmented call survives a restart of every service (the demo
	// server's included): submitted through A, every process stopped and
	// started again, its result through B in the same session.
	survivor := alice.submit("restart", 8)
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(t)
	}
	demo.stop(t)
	dbctx := context.Background()
	conn, err := pgx.Connect(dbctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var status string
	err = conn.QueryRow(dbctx, `SELECT status FROM mcp_tasks WHERE id = $1`, survivor.TaskId).Scan(&status)
	_ = conn.Close(dbctx)
	if err != nil || (status != "submitted" && status != "working") {
		t.Fatalf("the task across the restart is %q (%v), want it still running", status, err)
	}
	demo = startDemo()
	procs = startServices()
	aliceB = newTaskClient(t, "http://"+apiB, mcpAliceKey, thread, transport.WithSession(sid))
	raw, rerr = aliceB.send("tasks/result", map[string]any{"taskId": survivor.TaskId})
	if rerr != nil || !strings.Contains(string(raw), "Report on restart: 8 steps done.") || strings.Contains(string(raw), `"isError":true`) {
		t.Errorf("tasks/result after the restart = %s %+v", raw, rerr)
	}
}

// demoTasks reads the demo server's task states: topic → status.
func demoTasks(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Topic  string `json:"topic"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[st.Topic] = st.Status
	}
	return out
}

// awaitTaskStatus waits for the notification of task id reaching status.
func awaitTaskStatus(t *testing.T, statuses <-chan mcp.Task, id string, status mcp.TaskStatus) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case task := <-statuses:
			if task.TaskId == id && task.Status == status {
				if task.CreatedAt == "" || task.LastUpdatedAt == "" {
					t.Errorf("notifications/tasks/status without times: %+v", task)
				}
				return
			}
		case <-timeout:
			t.Fatalf("no notifications/tasks/status %s for %s", status, id)
		}
	}
}
