package toolcall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// nativeTaskFake is an HTTP MCP server with native task tools: long
// (taskSupport required) and maybe (optional). It counts the JSON-RPC
// methods it receives ("tools/call+task" for a task-augmented call).
type nativeTaskFake struct {
	mu      sync.Mutex
	methods map[string]int
	hold    chan struct{} // non-nil: tasks/get waits until it is closed (or the caller gives up)
}

func newNativeTaskFake(t *testing.T, versions ...string) (*nativeTaskFake, string) {
	t.Helper()
	f := &nativeTaskFake{methods: map[string]int{}}
	done := make(chan struct{})
	s := server.NewMCPServer("native", "0", server.WithToolCapabilities(true), server.WithTaskCapabilities(true, true, true))
	s.AddTool(mcp.NewTool("long", mcp.WithTaskSupport(mcp.TaskSupportRequired)), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-done // runs until the test ends: these tests stop at the submit
		return mcp.NewToolResultText("late"), nil
	})
	s.AddTool(mcp.NewTool("maybe", mcp.WithTaskSupport(mcp.TaskSupportOptional)), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("maybe now"), nil
	})
	// Native tasks are the 2025-11-25 task methods: a legacy-era server
	// (2026-07-28 moved tasks into an extension).
	if len(versions) == 0 {
		versions = []string{mcp.ProtocolVersion20251125}
	}
	h := server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(versions...))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Task json.RawMessage `json:"task"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Params.Task != nil {
			msg.Method += "+task"
		}
		f.mu.Lock()
		f.methods[msg.Method]++
		hold := f.hold
		f.mu.Unlock()
		if hold != nil && msg.Method == "tasks/get" {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(done); hs.Close() })
	return f, hs.URL + "/mcp"
}

func (f *nativeTaskFake) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.methods[method]
}

func startNative(t *testing.T, url string, st store.Store, enabled bool) *env {
	t.Helper()
	mt := config.DefaultSettings().MCPTasks
	mt.Enabled = enabled
	var ts store.TaskStore
	if st != nil {
		ts = st.Tasks()
	}
	return startWith(t, options{cfg: fmt.Sprintf(`{"mcpServers": {"native": {"type": "http", "url": %q}}}`, url), catalog: []bus.Tool{
		{Name: "native_long", Server: "native", OriginalName: "long", Execution: json.RawMessage(`{"taskSupport":"required"}`)},
		{Name: "native_maybe", Server: "native", OriginalName: "maybe", Execution: json.RawMessage(`{"taskSupport":"optional"}`)},
	}, tasks: ts, mcpTasks: mt})
}

// TestNativeTaskToolNeedsTheTaskRuntime: a task-required tool is refused
// before anything reaches the upstream when no task runtime can track it,
// or the thread id cannot own a task; an optional one is a plain call.
func TestNativeTaskToolNeedsTheTaskRuntime(t *testing.T) {
	t.Parallel()
	fake, url := newNativeTaskFake(t)
	e := startNative(t, url, nil, false)
	if _, err := e.call(t, bus.Call{Tool: "native_long", UserID: "alice", ThreadID: "th-1"}); err == nil || !strings.Contains(err.Error(), tasks.RuntimeNotInitialized) {
		t.Fatalf("err = %v, want the task runtime error", err)
	}
	if got := text(t, e.mustCall(t, bus.Call{Tool: "native_maybe", UserID: "alice", ThreadID: "th-1"})); got != "maybe now" {
		t.Errorf("plain call of an optional task tool = %q", got)
	}
	e = startNative(t, url, taskStore(t), true)
	if _, err := e.call(t, bus.Call{Tool: "native_long", UserID: "alice", ThreadID: "th.1"}); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("thread id with a dot: %v", err)
	}
	if n := fake.count("tools/call+task"); n != 0 {
		t.Errorf("refused calls reached the upstream: %d task-augmented calls", n)
	}
}

// TestTaskOnlyToolOfATasklessCaller: a caller that cannot take a task
// (a 2026-07-28 client without the tasks extension) gets the task-only
// tool refused (client_capability_missing: the tasks extension, naming
// the server) before
// anything reaches the upstream; an optional one is a plain call.
func TestTaskOnlyToolOfATasklessCaller(t *testing.T) {
	t.Parallel()
	fake, url := newNativeTaskFake(t)
	e := startNative(t, url, taskStore(t), true)
	_, err := e.call(t, bus.Call{Tool: "native_long", UserID: "alice", ThreadID: "th-1", Taskless: true})
	if e := bus.AsError(err); e.Code != bus.CodeClientCapabilityMissing || e.Details["server"] != "native" ||
		!strings.Contains(fmt.Sprint(e.Details["required_capabilities"]), bus.MCPTasksExtension) {
		t.Fatalf("err = %v (%+v), want the missing tasks extension, naming the server", err, e.Details)
	}
	if got := text(t, e.mustCall(t, bus.Call{Tool: "native_maybe", UserID: "alice", ThreadID: "th-1", Taskless: true})); got != "maybe now" {
		t.Errorf("optional task tool = %q", got)
	}
	if n := fake.count("tools/call+task"); n != 0 {
		t.Errorf("%d task-augmented calls reached the upstream", n)
	}
}

// TestNativeSubmitStoresTheUpstreamTask: the handle is the local task's,
// the row keeps the upstream's id and the tool; a task the database
// cannot take is cancelled upstream (tasks/cancel) and the caller gets
// unavailable.
func TestNativeSubmitStoresTheUpstreamTask(t *testing.T) {
	t.Parallel()
	fake, url := newNativeTaskFake(t)
	st := taskStore(t)
	e := startNative(t, url, st, true)
	r := e.mustCall(t, bus.Call{Tool: "native_long", UserID: "alice", ThreadID: "th-1", RunID: "run-1"})
	if r.Task == nil || r.Task.Status != "submitted" {
		t.Fatalf("reply = %+v", r)
	}
	row, err := st.Tasks().GetTask(context.Background(), store.GetTaskParams{ID: r.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	d := tasks.NativeDataOf(row.DriverData)
	if row.DriverName != tasks.DriverNative || row.RemoteTaskID == "" || d.Tool != "long" || d.ExpiresAt == nil || row.RunID != "run-1" || row.UserID != "alice" {
		t.Errorf("row = %+v, driver data %s", row, row.DriverData)
	}
	if strings.Contains(text(t, r), row.RemoteTaskID) {
		t.Errorf("the handle names the upstream's task id: %s", text(t, r))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = e.call(t, bus.Call{Tool: "native_long", UserID: "alice", ThreadID: "th-1"})
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if n := fake.count("tasks/cancel"); n != 1 {
		t.Errorf("tasks/cancel sent %d times, want the one best-effort cancel", n)
	}
}

// TestNativeTaskMethodTimeoutKeepsTheSession: a tasks/get that times out
// is upstream_timeout, and the session that created the task stays (the
// fake, like mcp-go servers, keeps a task only for its session): the next
// tasks/get finds the task. A task the upstream does not know is the
// reply's RPCError, not a failed call.
func TestNativeTaskMethodTimeoutKeepsTheSession(t *testing.T) {
	t.Parallel()
	fake, url := newNativeTaskFake(t)
	st := taskStore(t)
	e := startNative(t, url, st, true)
	r := e.mustCall(t, bus.Call{Tool: "native_long", UserID: "alice", ThreadID: "th-1"})
	row, err := st.Tasks().GetTask(context.Background(), store.GetTaskParams{ID: r.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	get := func(id string, timeoutMS int64) (bus.InternalCallReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return bus.Request[bus.InternalCallReply](ctx, e.bus.NC, e.bus.Names.InternalCall(), bus.InternalCallRequest{
			Server: "native", Method: bus.MethodTasksGet, TaskID: id, Call: bus.Call{Tool: "long", UserID: "alice", ThreadID: "th-1", TimeoutMS: timeoutMS},
		})
	}
	hold := make(chan struct{})
	fake.mu.Lock()
	fake.hold = hold
	fake.mu.Unlock()
	if _, err := get(row.RemoteTaskID, 200); !errors.Is(err, bus.ErrUpstreamTimeout) {
		t.Fatalf("held tasks/get: %v, want upstream_timeout", err)
	}
	fake.mu.Lock()
	fake.hold = nil
	fake.mu.Unlock()
	close(hold)
	reply, err := get(row.RemoteTaskID, 0)
	if err != nil || reply.RPCError != nil || !strings.Contains(string(reply.Result), `"working"`) {
		t.Fatalf("tasks/get after the timeout: %+v %s, %v; want the task, still working", reply.RPCError, reply.Result, err)
	}
	reply, err = get("no-such-task", 0)
	if err != nil || reply.RPCError == nil || reply.RPCError.Code != bus.RPCCodeInvalidParams {
		t.Fatalf("unknown task: %+v, %v; want RPCError -32602", reply, err)
	}
}

// TestNativeTaskOfAModernServer: with a 2026-07-28 server (the demo's
// -era modern research tool) the call declares the tasks extension and the
// flat CreateTaskResult becomes a row like a legacy task's; the task
// methods reach the server as the extension's (tasks/result is the result
// tasks/get inlines). A tool the server answers at once (echo, listed
// optional here) is a plain result and no row.
// startModernResearch runs toolcall for the demo's modern research server
// (native tasks over the 2026-07-28 tasks extension) with the server entry's
// extra fields, submits a research task on topic and returns the env, the
// task store and the task's row.
func startModernResearch(t *testing.T, extra, topic string) (*env, store.Store, *store.Task) {
	t.Helper()
	h, research, err := demo.NewModernResearchHandler()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	st := taskStore(t)
	mt := config.DefaultSettings().MCPTasks
	mt.Enabled = true
	e := startWith(t, options{cfg: fmt.Sprintf(`{"mcpServers": {"modern": {"type": "http", "url": %q%s}}}`, hs.URL+"/mcp", extra), catalog: []bus.Tool{
		{Name: "modern_research", Server: "modern", OriginalName: "research", Execution: json.RawMessage(`{"taskSupport":"optional"}`)},
		{Name: "modern_echo", Server: "modern", OriginalName: "echo", Execution: json.RawMessage(`{"taskSupport":"optional"}`)},
	}, tasks: st.Tasks(), mcpTasks: mt})
	r := e.mustCall(t, bus.Call{Tool: "modern_research", Arguments: json.RawMessage(fmt.Sprintf(`{"topic":%q,"steps":2}`, topic)),
		UserID: "alice", ThreadID: "th-1", Task: &bus.CallTask{}})
	if r.Task == nil || research.Stats().Created != 1 {
		t.Fatalf("reply = %+v, stats %+v", r, research.Stats())
	}
	row, err := st.Tasks().GetTask(context.Background(), store.GetTaskParams{ID: r.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	return e, st, row
}

// nativeMethod sends a task method of row's remote task through
// mcpbus.internal.call, as the task poller does.
func nativeMethod(t *testing.T, e *env, row *store.Task, method string) bus.InternalCallReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reply, err := bus.Request[bus.InternalCallReply](ctx, e.bus.NC, e.bus.Names.InternalCall(), bus.InternalCallRequest{
		Server: "modern", Method: method, TaskID: row.RemoteTaskID, Call: bus.Call{Tool: "research", UserID: "alice", ThreadID: "th-1"},
	})
	if err != nil || reply.RPCError != nil {
		t.Fatalf("%s: %+v, %v", method, reply.RPCError, err)
	}
	return reply
}

// A native task's tasks/result reflecting a configured secret (here the
// research topic is the server's header value) is redacted as a plain
// result is.
func TestNativeTaskResultIsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "hdr-NATIVE-secret-77"
	e, _, row := startModernResearch(t, fmt.Sprintf(`, "headers": {"X-Api-Key": %q}`, secret), secret)
	nativeMethod(t, e, row, bus.MethodTasksGet) // the demo's task finishes after a poll, as in TestNativeTaskOfAModernServer
	got := nativeMethod(t, e, row, bus.MethodTasksResult)
	if strings.Contains(string(got.Result), secret) || !strings.Contains(string(got.Result), "***") {
		t.Fatalf("tasks/result = %s, want the header value masked", got.Result)
	}
}

func TestNativeTaskOfAModernServer(t *testing.T) {
	t.Parallel()
	e, st, row := startModernResearch(t, "", "tides")
	if d := tasks.NativeDataOf(row.DriverData); row.DriverName != tasks.DriverNative || row.RemoteTaskID == "" || d.Tool != "research" ||
		d.TTLMS == nil || *d.TTLMS != 3600000 || d.PollIntervalMS != 500 {
		t.Errorf("row = %+v, driver data %s", row, row.DriverData)
	}
	call := func(method string) bus.InternalCallReply { return nativeMethod(t, e, row, method) }
	if got := call(bus.MethodTasksGet); !strings.Contains(string(got.Result), `"working"`) {
		t.Fatalf("tasks/get = %s", got.Result)
	}
	if got := call(bus.MethodTasksResult); !strings.Contains(string(got.Result), `"sources":2`) {
		t.Fatalf("tasks/result = %s", got.Result)
	}
	plain := e.mustCall(t, bus.Call{Tool: "modern_echo", Arguments: json.RawMessage(`{"message":"now"}`), UserID: "alice", ThreadID: "th-1", Task: &bus.CallTask{}})
	if plain.Task != nil || !strings.Contains(text(t, plain), "now") {
		t.Errorf("a call answered at once = %+v", plain)
	}
	rows, err := st.Tasks().ListTasks(context.Background(), store.ListTasksParams{Namespace: e.bus.Names.Namespace(), UserID: "alice", ThreadID: "th-1", Limit: 10})
	if err != nil || len(rows) != 1 {
		t.Errorf("rows = %v, %v; want the research task alone", rows, err)
	}
}
