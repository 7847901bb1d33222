package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/wiring"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// nativeFake is an MCP server over streamable HTTP whose tools declare
// native task support (mcp-go's task runtime): long_report requires a
// task and finishes when its topic's gate is closed; quick_report allows
// one. It records every task method per upstream task id, notices two
// tasks/get of one task in flight at once, and can hold tasks/get.
type nativeFake struct {
	url string

	mu       sync.Mutex
	gates    map[string]chan struct{} // topic → closed to finish long_report
	taskIDs  []string                 // upstream ids, in creation order
	methods  map[string]int           // "method taskId" → requests
	inflight map[string]int           // taskId → tasks/get in flight
	overlaps int
	hold     bool          // hold every tasks/get until release is closed
	held     chan string   // a held tasks/get's task id
	release  chan struct{} // closed: held calls go on
}

func newNativeFake(t *testing.T) *nativeFake {
	t.Helper()
	f := &nativeFake{gates: map[string]chan struct{}{}, methods: map[string]int{}, inflight: map[string]int{},
		held: make(chan string, 16), release: make(chan struct{})}
	s := server.NewMCPServer("native-fake", "0.1.0", server.WithToolCapabilities(true), server.WithTaskCapabilities(true, true, true))
	s.AddTool(mcp.NewTool("long_report", mcp.WithDescription("a report that takes a while"),
		mcp.WithString("topic", mcp.Required()), mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// mcp-go cancels a task's ctx once its CreateTaskResult is
			// sent (mark3labs/mcp-go#897): the work detaches.
			ctx = context.WithoutCancel(ctx)
			topic := r.GetString("topic", "")
			<-f.gate(topic)
			return mcp.NewToolResultStructured(map[string]any{"topic": topic, "pages": 12}, "report on "+topic), nil
		})
	s.AddTool(mcp.NewTool("quick_report", mcp.WithString("topic", mcp.Required()), mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("quick report on " + r.GetString("topic", "")), nil
		})
	// Native tasks are the 2025-11-25 task methods: a legacy-era server
	// (2026-07-28 moved tasks into an extension).
	h := server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20251125))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, h) }))
	t.Cleanup(func() {
		f.mu.Lock()
		for _, g := range f.gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		f.mu.Unlock()
		ts.Close()
	})
	f.url = ts.URL + "/mcp"
	return f
}

func (f *nativeFake) gate(topic string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.gates[topic]
	if !ok {
		g = make(chan struct{})
		f.gates[topic] = g
	}
	return g
}

func (f *nativeFake) finish(topic string) { close(f.gate(topic)) }

func (f *nativeFake) count(method, taskID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.methods[method+" "+taskID]
}

func (f *nativeFake) lastTaskID(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.taskIDs) == 0 {
		t.Fatal("the fake created no task")
	}
	return f.taskIDs[len(f.taskIDs)-1]
}

// serve records the request's method and task id, holds tasks/get when
// asked (until released or the caller gives up), and passes it on.
func (f *nativeFake) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			TaskID string          `json:"taskId"`
			Task   json.RawMessage `json:"task"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	id := msg.Params.TaskID
	if msg.Method == "tools/call" && msg.Params.Task != nil {
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		var resp struct {
			Result struct {
				Task struct {
					TaskID string `json:"taskId"`
				} `json:"task"`
			} `json:"result"`
		}
		if i := bytes.IndexByte(rec.body.Bytes(), '{'); i >= 0 {
			_ = json.NewDecoder(bytes.NewReader(rec.body.Bytes()[i:])).Decode(&resp)
		}
		if tid := resp.Result.Task.TaskID; tid != "" {
			f.mu.Lock()
			f.taskIDs = append(f.taskIDs, tid)
			f.mu.Unlock()
		}
		return
	}
	if !strings.HasPrefix(msg.Method, "tasks/") {
		next.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.methods[msg.Method+" "+id]++
	get := msg.Method == "tasks/get"
	hold := f.hold && get
	release := f.release
	if get {
		if f.inflight[id] > 0 {
			f.overlaps++
		}
		f.inflight[id]++
	}
	f.mu.Unlock()
	if get {
		defer func() {
			f.mu.Lock()
			f.inflight[id]--
			f.mu.Unlock()
		}()
	}
	if hold {
		f.held <- id
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	next.ServeHTTP(w, r)
}

// recorder copies a response's body as it is written.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// nativeStack runs discovery, toolcall and taskpoller in this process (each
// with its own runtime, as `mcpbus serve` does) on the machine's NATS in a
// fresh namespace and a PostgreSQL schema of its own.
type nativeStack struct {
	b        *testkit.Bus
	base     string // the api's URL ("" without one)
	opts     bootstrap.Options
	logs     *testkit.SyncBuffer
	mu       sync.Mutex
	services map[string]func() func() // name → cancel, returning a wait for Run to return
}

func startNativeStack(t *testing.T, ext string, toolcalls int, withAPI bool) *nativeStack {
	t.Helper()
	b := testkit.StartBus(t)
	dir := t.TempDir()
	settings := natsSettings(b.URL, b.Names) + fmt.Sprintf("database:\n  backend: postgres\n  url: %q\nmcp_tasks:\n  enabled: true\n"+
		"  poll_interval_seconds: 1\n  lease_seconds: 30\nlog:\n  level: warn\n", testSchema(t))
	apiAddr := ""
	if withAPI {
		apiAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		settings += fmt.Sprintf("api:\n  listen: %s\n  keys:\n    - {sha256: %s, user_id: alice, role: user}\n", apiAddr, sha(mcpAliceKey))
	}
	for name, content := range map[string]string{"config.yaml": settings, "extensions_config.json": ext} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.PublishExtensions(t, ext)
	st := &nativeStack{b: b, logs: &testkit.SyncBuffer{}, services: map[string]func() func(){},
		opts: bootstrap.Options{ConfigPath: filepath.Join(dir, "config.yaml"), ExtensionsPath: filepath.Join(dir, "extensions_config.json")}}
	t.Cleanup(func() {
		st.mu.Lock()
		stops := st.services
		st.services = map[string]func() func(){}
		st.mu.Unlock()
		for _, stop := range stops {
			stop()()
		}
		if t.Failed() {
			t.Logf("--- service logs ---\n%s", st.logs.String())
		}
	})
	st.start(t, "discovery", service(t, "discovery"))
	var (
		replicasMu sync.Mutex
		replicas   []*toolcall.Service
	)
	for i := range toolcalls {
		svc := service(t, "toolcall")
		build := svc.Build
		svc.Build = func(ctx context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error) {
			r, err := build(ctx, rt, db)
			if tc, ok := r.(*toolcall.Service); ok {
				replicasMu.Lock()
				replicas = append(replicas, tc)
				replicasMu.Unlock()
			}
			return r, err
		}
		st.start(t, fmt.Sprint("toolcall-", i), svc)
	}
	st.start(t, "taskpoller", service(t, "taskpoller"))
	waitHealthy(t, b.URL, b.Names, bus.ServiceDiscovery, bus.ServiceTaskpoller)
	if withAPI {
		st.start(t, "api", service(t, "api"))
		waitHealthy(t, b.URL, b.Names, bus.ServiceAPI)
		st.base = "http://" + apiAddr
		testkit.Eventually(t, 60*time.Second, "the api to listen", func() bool {
			resp, err := http.Get(st.base + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return true
		})
	}
	// Every toolcall replica serves and knows the others (a stdio session
	// has one owner).
	testkit.Eventually(t, 60*time.Second, "the toolcall replicas to see each other", func() bool {
		replicasMu.Lock()
		defer replicasMu.Unlock()
		if len(replicas) != toolcalls {
			return false
		}
		for _, r := range replicas {
			if live, _ := r.Replicas(); !r.Ready() || len(live) != toolcalls {
				return false
			}
		}
		return true
	})
	return st
}

// service is the wiring of one service, as `mcpbus serve` runs it.
func service(t *testing.T, name string) wiring.Service {
	t.Helper()
	svc, ok := wiring.ByName(name)
	if !ok {
		t.Fatalf("no service %q", name)
	}
	return svc
}

// start runs svc (its own runtime, connection and database pool) until
// stop(name).
func (st *nativeStack) start(t *testing.T, name string, svc wiring.Service) {
	t.Helper()
	rt, err := bootstrap.Load(st.opts, config.Env{}, st.logs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wiring.Serve(ctx, rt, svc, nil) }()
	st.mu.Lock()
	st.services[name] = func() func() {
		cancel()
		return func() {
			if err := testkit.Receive(t, 60*time.Second, name+" to stop", done); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	st.mu.Unlock()
}

// stop cancels the service's context (it starts draining) and returns a
// wait for it to have stopped.
func (st *nativeStack) stop(name string) (wait func()) {
	st.mu.Lock()
	stop := st.services[name]
	delete(st.services, name)
	st.mu.Unlock()
	return stop()
}

func (st *nativeStack) call(t *testing.T, req bus.Call) (bus.ToolsCallReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Request[bus.ToolsCallReply](ctx, st.b.NC, st.b.Names.ToolsCall(), req)
}

func (st *nativeStack) task(t *testing.T, user, thread, id string) (bus.TaskDetail, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Request[bus.TaskDetail](ctx, st.b.NC, st.b.Names.TasksGet(), bus.TaskListRequest{UserID: user, ThreadID: thread, TaskID: id})
}

// awaitStatus waits until the task has status and returns it.
func (st *nativeStack) awaitStatus(t *testing.T, user, thread, id, status string) bus.TaskDetail {
	t.Helper()
	var d bus.TaskDetail
	testkit.Eventually(t, 60*time.Second, "task "+id+" to be "+status, func() bool {
		var err error
		d, err = st.task(t, user, thread, id)
		return err == nil && d.Status == status
	})
	return d
}

// awaitTool waits until the catalog lists name.
func (st *nativeStack) awaitTool(t *testing.T, name string) bus.Tool {
	t.Helper()
	var found bus.Tool
	testkit.Eventually(t, 60*time.Second, "the catalog to list "+name, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cat, err := bus.Request[bus.ToolsListReply](ctx, st.b.NC, st.b.Names.ToolsList(), bus.ToolsListRequest{UserID: "alice", ThreadID: "th"})
		if err != nil {
			return false
		}
		for _, tl := range cat.Tools {
			if tl.Name == name {
				found = tl
				return true
			}
		}
		return false
	})
	return found
}

// TestNativeMCPTasksAreDurable: an upstream tool that requires MCP task
// augmentation is called task-augmented and tracked in mcp_tasks. The
// caller gets the toolset handle; the poller follows the upstream task
// with tasks/get and tasks/result, also across a poller restart while one
// of its tasks/get is in flight (the stopping poller drains: its call
// returns and is stored under its lease; the new poller completes the
// task and no two tasks/get of the task ever overlap); tasks/cancel ends
// another; an
// optional one stays a plain call unless a task is asked for; and another
// user never sees the task.
func TestNativeMCPTasksAreDurable(t *testing.T) {
	t.Parallel()
	f := newNativeFake(t)
	st := startNativeStack(t, fmt.Sprintf(`{"mcpServers": {"fake": {"type": "http", "url": %q}}}`, f.url), 2, false)
	tool := st.awaitTool(t, "fake_long_report")
	if tool.TaskSupport() != bus.TaskSupportRequired {
		t.Fatalf("catalog entry lost execution.taskSupport: %s", tool.Execution)
	}

	// A poll held in flight when its poller stops.
	f.mu.Lock()
	f.hold = true
	f.mu.Unlock()
	reply, err := st.call(t, bus.Call{Tool: "fake_long_report", Arguments: json.RawMessage(`{"topic":"durable"}`), UserID: "alice", ThreadID: "th1"})
	if err != nil {
		t.Fatalf("call of a task-required tool: %v", err)
	}
	if reply.Task == nil || !strings.HasPrefix(reply.Task.TaskID, "mcp-task-") || reply.Task.Status != "submitted" {
		t.Fatalf("reply = %+v, want a submitted task handle", reply)
	}
	remote := f.lastTaskID(t)
	raw, _ := json.Marshal(reply)
	if strings.Contains(string(raw), remote) {
		t.Fatalf("the reply names the upstream's task id: %s", raw)
	}
	heldID := testkit.Receive(t, 60*time.Second, "a tasks/get to be held", f.held)
	if heldID != remote {
		t.Fatalf("tasks/get for %q, want %q", heldID, remote)
	}
	// The poller stops while its tasks/get is in flight: it drains (the
	// call returns and is stored under its lease) and a new poller takes
	// over.
	stopped := st.stop("taskpoller")
	f.mu.Lock()
	f.hold = false
	close(f.release)
	f.mu.Unlock()
	stopped()
	st.start(t, "taskpoller", service(t, "taskpoller"))
	st.awaitStatus(t, "alice", "th1", reply.Task.TaskID, "working")
	f.finish("durable")
	d := st.awaitStatus(t, "alice", "th1", reply.Task.TaskID, "completed")
	var result struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		Meta              map[string]any   `json:"_meta"`
	}
	if err := json.Unmarshal(d.Result, &result); err != nil || result.StructuredContent["topic"] != "durable" || len(result.Content) == 0 {
		t.Fatalf("result = %s (%v), want the upstream's CallToolResult", d.Result, err)
	}
	if strings.Contains(string(d.Result), remote) {
		t.Errorf("the stored result names the upstream's task id: %s", d.Result)
	}
	if n := f.count("tasks/result", remote); n != 1 {
		t.Errorf("tasks/result sent %d times, want 1", n)
	}
	f.mu.Lock()
	overlaps := f.overlaps
	f.mu.Unlock()
	if overlaps != 0 {
		t.Errorf("%d tasks/get overlapped another for the same task", overlaps)
	}
	if _, err := st.task(t, "bob", "th1", reply.Task.TaskID); err == nil || bus.AsError(err).Code != bus.CodeNotFound {
		t.Errorf("bob reading alice's task: %v, want not_found", err)
	}

	// tasks/cancel ends a running upstream task.
	reply, err = st.call(t, bus.Call{Tool: "fake_long_report", Arguments: json.RawMessage(`{"topic":"doomed"}`), UserID: "alice", ThreadID: "th2"})
	if err != nil || reply.Task == nil {
		t.Fatalf("second submit: %+v, %v", reply, err)
	}
	remote = f.lastTaskID(t)
	st.awaitStatus(t, "alice", "th2", reply.Task.TaskID, "working")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.Request[bus.TaskDetail](ctx, st.b.NC, st.b.Names.TasksCancel(), bus.TaskListRequest{UserID: "alice", ThreadID: "th2", TaskID: reply.Task.TaskID}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	st.awaitStatus(t, "alice", "th2", reply.Task.TaskID, "cancelled")
	if n := f.count("tasks/cancel", remote); n != 1 {
		t.Errorf("tasks/cancel sent %d times, want 1", n)
	}

	// optional: a plain call unless a task is asked for.
	plain, err := st.call(t, bus.Call{Tool: "fake_quick_report", Arguments: json.RawMessage(`{"topic":"now"}`), UserID: "alice", ThreadID: "th3"})
	if err != nil || plain.Task != nil || !strings.Contains(string(plain.Content[0]), "quick report on now") {
		t.Fatalf("plain call of an optional task tool: %+v, %v", plain, err)
	}
	asked, err := st.call(t, bus.Call{Tool: "fake_quick_report", Arguments: json.RawMessage(`{"topic":"later"}`), UserID: "alice", ThreadID: "th3",
		Task: &bus.CallTask{TTLMS: 600000}})
	if err != nil || asked.Task == nil {
		t.Fatalf("task-requested call of an optional task tool: %+v, %v", asked, err)
	}
	d = st.awaitStatus(t, "alice", "th3", asked.Task.TaskID, "completed")
	if !strings.Contains(string(d.Result), "quick report on later") {
		t.Errorf("optional task result = %s", d.Result)
	}
}

// TestServerEverythingResearchQueryIsADurableTask: server-everything's
// simulate-research-query (taskSupport required; four one-second stages;
// elicitation only when ambiguous and the client supports it, which
// mcpbus does not declare) completes through mcpbus as a durable task over
// stdio, its report stored as the task's result. Two toolcall replicas
// serve the calls: the thread's server-everything process lives on one,
// and a tasks/get that lands on the other is handed over to it. Through
// /mcp it is a task of the 2025-11-25 protocol, and of the 2026-07-28
// tasks extension (without the extension declared, -32021).
func TestServerEverythingResearchQueryIsADurableTask(t *testing.T) {
	t.Parallel()
	entry := testkit.Everything(t)
	st := startNativeStack(t, fmt.Sprintf(`{"mcpServers": {"ev": {"command": "node", "args": [%q, "stdio"]}}}`, entry), 2, true)
	tool := st.awaitTool(t, "ev_simulate-research-query")
	if tool.TaskSupport() != bus.TaskSupportRequired {
		t.Fatalf("execution = %s, want taskSupport required", tool.Execution)
	}
	reply, err := st.call(t, bus.Call{Tool: "ev_simulate-research-query", Arguments: json.RawMessage(`{"topic":"durable tasks"}`),
		UserID: "alice", ThreadID: "research"})
	if err != nil || reply.Task == nil {
		t.Fatalf("simulate-research-query through mcpbus: %+v, %v", reply, err)
	}
	d := st.awaitStatus(t, "alice", "research", reply.Task.TaskID, "completed")
	if !strings.Contains(string(d.Result), "Research Report: durable tasks") || d.ResultFormat != bus.ResultFormatCallToolResult {
		t.Fatalf("result = %s (format %q)", d.Result, d.ResultFormat)
	}

	// The same through /mcp in MCP's task protocol: the tool is listed as
	// task-required, a task-augmented call answers with mcpbus's task id,
	// and tasks/result returns the upstream's report once the durable task
	// completed.
	mc := newTaskClient(t, st.base, mcpAliceKey, "research-mcp")
	initialized(t, mc.c, mcp.ProtocolVersion20251125)
	raw, rerr := mc.send("tools/list", map[string]any{})
	if rerr != nil || !strings.Contains(string(raw), `"execution":{"taskSupport":"required"}`) {
		t.Fatalf("tools/list: %s %v", raw, rerr)
	}
	raw, rerr = mc.send("tools/call", map[string]any{"name": "ev_simulate-research-query",
		"arguments": map[string]any{"topic": "mcp tasks"}, "task": map[string]any{"ttl": 120000}})
	if rerr != nil {
		t.Fatalf("task-augmented tools/call: %d %s", rerr.Code, rerr.Message)
	}
	var ctr mcp.CreateTaskResult
	if err := json.Unmarshal(raw, &ctr); err != nil || !strings.HasPrefix(ctr.Task.TaskId, "mcp-task-") {
		t.Fatalf("CreateTaskResult %s: %v", raw, err)
	}
	raw, rerr = mc.send("tasks/result", map[string]any{"taskId": ctr.Task.TaskId})
	if rerr != nil {
		t.Fatalf("tasks/result: %d %s", rerr.Code, rerr.Message)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("tasks/result = %s (%v)", raw, err)
	}
	if tc, ok := res.Content[0].(mcp.TextContent); !ok || !strings.Contains(tc.Text, "Research Report: mcp tasks") {
		t.Errorf("tasks/result content = %s", raw)
	}
	if !strings.Contains(string(raw), `"io.modelcontextprotocol/related-task":{"taskId":"`+ctr.Task.TaskId+`"}`) {
		t.Errorf("tasks/result _meta does not name mcpbus's task: %s", raw)
	}

	// And for a 2026-07-28 client (this legacy upstream's task through the
	// tasks extension): without the extension the task-only tool is
	// -32021 naming the server, with it a task whose tasks/get inlines the
	// report.
	modern := modernTaskClient{t: t, base: st.base, key: mcpAliceKey, thread: "research-2026", withoutTasks: true}
	_, reply26 := modern.send("tools/call", map[string]any{"name": "ev_simulate-research-query", "arguments": map[string]any{"topic": "x"}})
	if reply26.Error == nil || reply26.Error.Code != -32021 || !strings.Contains(reply26.Error.Message, "'ev'") {
		t.Errorf("task-only tool without the tasks extension: %+v", reply26.Error)
	}
	modern.withoutTasks = false
	task := modern.terminal(modern.create("ev_simulate-research-query", map[string]any{"topic": "extension tasks"}))
	if res, _ := json.Marshal(task["result"]); task["status"] != "completed" || !strings.Contains(string(res), "Research Report: extension tasks") {
		t.Errorf("the research task through the tasks extension: %v", task)
	}
}
