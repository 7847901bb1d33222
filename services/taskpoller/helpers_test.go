package taskpoller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

// backendsUnderTest are the durable backends every service test runs on.
var backendsUnderTest = []string{store.BackendSQLite, store.BackendPostgres}

// forEachBackend runs fn as a parallel subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	t.Helper()
	for _, b := range backendsUnderTest {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// openStore returns a fresh migrated database of backend for this test: a
// temp SQLite file, or a PostgreSQL schema of its own (TEST_DATABASE_URL;
// the test fails when PostgreSQL is unreachable).
func openStore(t testing.TB, backend string) store.Store {
	t.Helper()
	ctx := context.Background()
	var db config.DatabaseSettings
	switch backend {
	case store.BackendSQLite:
		db = config.DatabaseSettings{Backend: config.BackendSQLite, Path: filepath.Join(t.TempDir(), "db.sqlite")}
	case store.BackendPostgres:
		db = config.DatabaseSettings{Backend: config.BackendPostgres, URL: testSchemaURL(t)}
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	if _, err := backends.Migrate(ctx, db, observability.Discard()); err != nil {
		t.Fatalf("migrate %s: %v", backend, err)
	}
	st, err := backends.Open(ctx, db, observability.Discard())
	if err != nil {
		t.Fatalf("open %s: %v", backend, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// testSchemaURL is a testkit.PostgresSchema with a pool for the pollers.
func testSchemaURL(t testing.TB) string {
	t.Helper()
	dsn, _ := testkit.PostgresSchema(t, map[string]string{"pool_max_conns": "32"})
	return dsn
}

// fakeToolcall stands in for the toolcall service at the edge: it answers
// mcpbus.internal.call by calling an in-process MCP server (the demo task
// server plus scripted tools) and counts calls.
type fakeToolcall struct {
	t      testing.TB
	mcp    *client.Client
	server *server.MCPServer

	mu       sync.Mutex
	calls    map[string]int // "tool task_id" → calls
	inflight map[string]int // task_id → calls in flight
	overlaps int            // calls made while another for the same task was in flight
	requests []bus.InternalCallRequest
	gates    map[string]chan struct{} // task_id → closed to let its status calls through
	started  map[string]chan struct{} // task_id → closed when a gated call arrived
	failWith map[string]*bus.Error    // tool → error reply
	// deadlines holds, per task_id, when each status call's requester
	// stops waiting (arrival plus its Mcpbus-Timeout-Ms).
	deadlines map[string][]time.Time
}

func newFakeToolcall(t testing.TB, nc *nats.Conn, names bus.Names) *fakeToolcall {
	t.Helper()
	srv, err := demo.New(demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeToolcall{t: t, server: srv, calls: map[string]int{}, inflight: map[string]int{},
		gates: map[string]chan struct{}{}, started: map[string]chan struct{}{}, failWith: map[string]*bus.Error{},
		deadlines: map[string][]time.Time{}}
	addScriptedTools(srv)
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION,
		ClientInfo:      mcp.Implementation{Name: "fake-toolcall", Version: "0"},
	}}); err != nil {
		t.Fatal(err)
	}
	f.mcp = c
	sub, err := nc.QueueSubscribe(names.InternalCall(), "toolcall", func(m *nats.Msg) { go f.serve(m) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeToolcall) serve(m *nats.Msg) {
	var req bus.InternalCallRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		f.t.Errorf("internal call body: %v", err)
		return
	}
	var args struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	f.mu.Lock()
	if ms, err := strconv.ParseInt(m.Header.Get(bus.HeaderTimeout), 10, 64); err == nil && req.Tool == "get_report_status" {
		f.deadlines[args.TaskID] = append(f.deadlines[args.TaskID], time.Now().Add(time.Duration(ms)*time.Millisecond))
	}
	f.calls[req.Tool+" "+args.TaskID]++
	f.requests = append(f.requests, req)
	if f.inflight[args.TaskID] > 0 {
		f.overlaps++
	}
	f.inflight[args.TaskID]++
	gate, started := f.gates[args.TaskID], f.started[args.TaskID]
	failure := f.failWith[req.Tool]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight[args.TaskID]--
		f.mu.Unlock()
	}()
	if gate != nil && req.Tool == "get_report_status" {
		select {
		case <-started:
		default:
			close(started)
		}
		<-gate
	}
	if failure != nil {
		respondError(m, failure)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var call mcp.CallToolRequest
	call.Params.Name = req.Tool
	call.Params.Arguments = map[string]any{"task_id": args.TaskID}
	res, err := f.mcp.CallTool(ctx, call)
	if err != nil {
		respondError(m, bus.Wrap(bus.CodeUpstreamError, err, "upstream call failed: "+err.Error()))
		return
	}
	reply := bus.InternalCallReply{IsError: res.IsError, StructuredContent: res.RawStructuredContent}
	if reply.StructuredContent == nil && res.StructuredContent != nil {
		reply.StructuredContent, _ = json.Marshal(res.StructuredContent)
	}
	for _, c := range res.Content {
		b, _ := json.Marshal(c)
		reply.Content = append(reply.Content, b)
	}
	body, _ := json.Marshal(reply)
	_ = m.Respond(body)
}

func respondError(m *nats.Msg, e *bus.Error) {
	body, _ := json.Marshal(bus.ErrorReply{Error: e})
	msg := nats.NewMsg(m.Reply)
	msg.Data = body
	msg.Header.Set(bus.HeaderError, string(e.Code))
	_ = m.RespondMsg(msg)
}

// count returns the calls of tool for a remote task id.
func (f *fakeToolcall) count(tool, taskID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[tool+" "+taskID]
}

// hold makes status calls for taskID wait until the returned release is
// called; started is closed when the first such call arrives.
func (f *fakeToolcall) hold(taskID string) (started <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gate, st := make(chan struct{}), make(chan struct{})
	f.gates[taskID], f.started[taskID] = gate, st
	var once sync.Once
	return st, func() { once.Do(func() { close(gate) }) }
}

// fail makes calls of tool answer with e (nil: stop failing).
func (f *fakeToolcall) fail(tool string, e *bus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e == nil {
		delete(f.failWith, tool)
		return
	}
	f.failWith[tool] = e
}

// submit calls the demo's submit_report directly (as toolcall's submit
// does) and returns the remote id.
func (f *fakeToolcall) submit(args map[string]any) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var call mcp.CallToolRequest
	call.Params.Name = "submit_report"
	call.Params.Arguments = args
	res, err := f.mcp.CallTool(ctx, call)
	if err != nil || res.IsError {
		f.t.Fatalf("submit_report: %v %+v", err, res)
	}
	raw := res.RawStructuredContent
	if raw == nil {
		raw, _ = json.Marshal(res.StructuredContent)
	}
	sub, err := tasks.ParseSubmit("submit_report", raw)
	if err != nil {
		f.t.Fatalf("submit reply: %v", err)
	}
	return sub.RemoteTaskID
}

// reportTools is the demo's task toolset.
var reportTools = tasks.DriverData{Toolset: "reports", SubmitTool: "submit_report", StatusTool: "get_report_status", CancelTool: "cancel_report"}

// insertTask stores a task row as the submit path does: due now.
func insertTask(t testing.TB, ts store.TaskStore, user, thread, remoteID string, tools tasks.DriverData) *store.Task {
	t.Helper()
	now := time.Now().Add(-time.Millisecond)
	row := &store.Task{
		UserID: user, ThreadID: thread, ServerName: "demo", DriverName: tasks.DriverStructured,
		RemoteTaskID: remoteID, TaskName: "report task", DriverData: tools.Marshal(),
		NextPollAt: &now,
	}
	if err := insertRow(ts, row); err != nil {
		t.Fatalf("insert task: %v", err)
	}
	return row
}

// insertRow inserts row and copies the stored row back into it.
func insertRow(ts store.TaskSubmitStore, row *store.Task) error {
	got, err := ts.InsertTask(context.Background(), store.InsertTaskParams{Task: *row})
	if err == nil {
		*row = *got
	}
	return err
}

// harness is one test's bus, database, fake toolcall and pollers.
type harness struct {
	t     *testing.T
	bus   *testkit.Bus
	store store.Store
	tasks store.TaskStore
	fake  *fakeToolcall
	cfg   taskpoller.Config
}

// fastConfig polls often with short backoffs so tests finish quickly.
func fastConfig() taskpoller.Config {
	return taskpoller.Config{
		Enabled: true,
		Tasks: tasks.Settings{
			PollInterval:                50 * time.Millisecond,
			MaxPollBackoff:              200 * time.Millisecond,
			InputRequiredPollInterval:   3 * time.Second,
			TrackingDegradedAfterErrors: 3,
			MaxResultBytes:              65536,
			ResultPreviewMaxChars:       2000,
		},
		Lease:              30 * time.Second,
		MaxConcurrentPolls: 8,
		StopTimeout:        5 * time.Second,
	}
}

func setup(t *testing.T, backend string) *harness {
	t.Helper()
	b := testkit.StartBus(t)
	st := openStore(t, backend)
	return &harness{t: t, bus: b, store: st, tasks: submitter{st.Tasks(), b.Names.Namespace()}, fake: newFakeToolcall(t, b.Connect(t), b.Names), cfg: fastConfig()}
}

// submitter is the task store as the deployment's services use it: a row
// belongs to the namespace of the deployment (toolcall writes it, the
// pollers claim only their own, the task API cancels only its own).
type submitter struct {
	store.TaskStore
	namespace string
}

func (s submitter) InsertTask(ctx context.Context, p store.InsertTaskParams) (*store.Task, error) {
	p.Task.Namespace = s.namespace
	return s.TaskStore.InsertTask(ctx, p)
}

func (s submitter) RequestCancel(ctx context.Context, p store.RequestCancelParams) (*store.Task, error) {
	p.Namespace = s.namespace
	return s.TaskStore.RequestCancel(ctx, p)
}

// running is a started poller replica.
type running struct {
	svc    *taskpoller.Service
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, once done
}

// stop cancels the replica and waits for Run to return.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after stop")
	}
}

// start runs one poller replica until the test ends (or stop).
func (h *harness) start(mutate ...func(*taskpoller.Config, *taskpoller.Deps)) *running {
	h.t.Helper()
	cfg := h.cfg
	deps := taskpoller.Deps{Log: testLogger(h.t), NC: h.bus.Connect(h.t), Names: h.bus.Names, Store: h.store, Tasks: h.tasks, Events: h.bus.JS}
	for _, m := range mutate {
		m(&cfg, &deps)
	}
	svc, err := taskpoller.New(cfg, deps)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{svc: svc, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = svc.Run(ctx)
	}()
	h.t.Cleanup(func() {
		cancel()
		testkit.Receive(h.t, 60*time.Second, "the poller's Run to return after its context was cancelled", r.done)
	})
	testkit.Eventually(h.t, 10*time.Second, "the poller to be ready", func() bool {
		hr, err := bus.Request[bus.HealthReply](context.Background(), h.bus.NC, h.bus.Names.Health(bus.ServiceTaskpoller), struct{}{})
		return err == nil && hr.Ready
	})
	return r
}

func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t) }

// get reads a row.
func (h *harness) get(id string) *store.Task {
	h.t.Helper()
	row, err := h.tasks.GetTask(context.Background(), store.GetTaskParams{ID: id})
	if err != nil {
		h.t.Fatalf("GetTask: %v", err)
	}
	return row
}

// waitStatus waits until the row reaches status.
func (h *harness) waitStatus(id, status string, timeout time.Duration) *store.Task {
	h.t.Helper()
	var row *store.Task
	testkit.Eventually(h.t, timeout, fmt.Sprintf("task %s to reach %s", id, status), func() bool {
		row = h.get(id)
		return row.Status == status
	})
	return row
}
