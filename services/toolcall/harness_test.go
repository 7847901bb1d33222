package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

type options struct {
	cfg         string
	catalog     []bus.Tool
	guardrails  config.Guardrails
	maxSessions int
	maxPerUser  int
	registry    *interceptors.Registry
	quiet       bool // log nothing (benchmarks)
	// userTools adds a user's personal tools to the catalog when the
	// request carries that user_id, as discovery does.
	userTools func(user string) []bus.Tool
	// personal is the personal stdio launch policy (zero: refused).
	personal launchpolicy.PersonalOptions
	// workspace is the workspace root (default a t.TempDir).
	workspace string
	// tasks and mcpTasks enable the durable-task submit path.
	tasks    store.TaskStore
	mcpTasks config.MCPTasks
	// upstream is the egress allowlist and limits (loopbackEgress for
	// personal connections to the tests' servers).
	upstream config.Upstream
	// metrics receives the service's metrics (default: its own registry);
	// audit, when set, writes the audit stream with these settings.
	metrics *metrics.Toolcall
	audit   *config.AuditSettings
	// auditDB, with audit, also receives the records (audit.database).
	auditDB audit.Table
	// userSubjects serves the per-user subjects (nats.bind_identity).
	userSubjects bool
	// virtual is config.yaml's virtual servers; now the quota clock.
	virtual config.VirtualSettings
	now     func() time.Time
}

// loopbackEgress lets personal connections reach the tests' servers on
// 127.0.0.1, which the egress policy refuses by default.
var loopbackEgress = config.Upstream{Egress: config.EgressSettings{Allow: []string{"127.0.0.1"}}}

type env struct {
	catalogRequests *atomic.Int64
	// wholeCatalogRequests counts the catalog requests that were not a
	// lookup of one tool.
	wholeCatalogRequests *atomic.Int64
	bus                  *testkit.Bus
	workspace            string
	logs                 *testkit.SyncBuffer
	svc                  *toolcall.Service
	stop                 func()
}

// start runs toolcall on its own bus with cfgJSON published and a catalog
// responder standing in for discovery (the bus contract, not a mock of it).
func start(t *testing.T, cfgJSON string, catalog []bus.Tool) *env {
	t.Helper()
	return startWith(t, options{cfg: cfgJSON, catalog: catalog})
}

func startWith(t testing.TB, o options) *env {
	t.Helper()
	b := testkit.StartBus(t)
	b.Names = b.Names.WithUserSubjects(o.userSubjects)
	b.PublishExtensions(t, o.cfg)
	catNC := b.Connect(t)
	var catalogRequests, wholeCatalogRequests atomic.Int64
	_, err := catNC.Subscribe(b.Names.InternalCatalog(), func(m *nats.Msg) {
		catalogRequests.Add(1)
		var req bus.ToolsListRequest
		_ = json.Unmarshal(m.Data, &req)
		tools := o.catalog
		if o.userTools != nil {
			tools = append(slices.Clone(tools), o.userTools(req.UserID)...)
		}
		if req.Tool == "" {
			wholeCatalogRequests.Add(1)
		} else {
			// A lookup of one tool, as discovery answers it.
			tools = slices.DeleteFunc(slices.Clone(tools), func(t bus.Tool) bool { return t.Name != req.Tool })
		}
		body, _ := json.Marshal(bus.ToolsListReply{Tools: tools, CatalogHash: "test"})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := catNC.Flush(); err != nil {
		t.Fatal(err)
	}
	r := runReplica(t, b, o)
	return &env{catalogRequests: &catalogRequests, wholeCatalogRequests: &wholeCatalogRequests, bus: b, workspace: r.workspace, logs: r.logs, svc: r.svc, stop: r.stop}
}

// replica is one running toolcall service.
type replica struct {
	svc       *toolcall.Service
	workspace string
	logs      *testkit.SyncBuffer
	stop      func()
}

// addReplica runs another toolcall service on e's bus (its own NATS
// connection and workspace root), as a second process would.
func (e *env) addReplica(t testing.TB, o options) *replica {
	t.Helper()
	return runReplica(t, e.bus, o)
}

// runReplica runs a toolcall service on b until the test ends (or stop)
// and waits until it is ready.
func runReplica(t testing.TB, b *testkit.Bus, o options) *replica {
	t.Helper()
	if o.maxSessions == 0 {
		o.maxSessions = 8
	}
	ws := o.workspace
	if ws == "" {
		ws = t.TempDir()
	}
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.quiet {
		log = slog.New(slog.DiscardHandler)
	}
	var auditW *audit.Writer
	if o.audit != nil {
		w, err := audit.NewWriter(context.Background(), b.Connect(t), b.Names, audit.WriterOptions{Settings: *o.audit, Log: log, DB: o.auditDB})
		if err != nil {
			t.Fatal(err)
		}
		auditW = w
	}
	svc, err := toolcall.New(toolcall.Config{WorkspaceRoot: ws, MaxSessions: o.maxSessions, MaxSessionsPerUser: o.maxPerUser, Guardrails: o.guardrails, Personal: o.personal, MCPTasks: o.mcpTasks, Upstream: o.upstream, Virtual: o.virtual},
		toolcall.Deps{Log: log, NC: b.Connect(t), Names: b.Names, KV: b.KV, PresenceKV: b.Presence, Interceptors: o.registry, Tasks: o.tasks, Metrics: o.metrics, Audit: auditW, Clock: o.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := testkit.Receive(t, 60*time.Second, "toolcall Run to return after its context was cancelled", done); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	testkit.Eventually(t, 10*time.Second, "toolcall ready", svc.Ready)
	return &replica{svc: svc, workspace: ws, logs: logs, stop: stop}
}

func (e *env) call(t *testing.T, req bus.Call) (bus.ToolsCallReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, e.bus.Names.ToolsCall(), req)
}

func (e *env) mustCall(t *testing.T, req bus.Call) bus.ToolsCallReply {
	t.Helper()
	r, err := e.call(t, req)
	if err != nil {
		t.Fatalf("call %s: %v", req.Tool, err)
	}
	return r
}

// tokens answers mcpbus.internal.token like the tokens service would.
func (e *env) tokens(t *testing.T, value string) {
	t.Helper()
	nc := e.bus.Connect(t)
	if _, err := nc.Subscribe(e.bus.Names.InternalToken(), func(m *nats.Msg) {
		body, _ := json.Marshal(bus.TokenReply{Header: "Authorization", Value: value, ExpiresAt: time.Now().Add(time.Hour)})
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func text(t *testing.T, r bus.ToolsCallReply) string {
	t.Helper()
	var sb strings.Builder
	for _, c := range r.Content {
		var block struct{ Type, Text string }
		if err := json.Unmarshal(c, &block); err != nil {
			t.Fatal(err)
		}
		sb.WriteString(block.Text)
	}
	return sb.String()
}

func who(t *testing.T, r bus.ToolsCallReply) identity {
	t.Helper()
	var w identity
	if err := json.Unmarshal(r.StructuredContent, &w); err != nil {
		t.Fatalf("whoami structured content %s: %v", r.StructuredContent, err)
	}
	return w
}

func tools(server string, names ...string) []bus.Tool {
	var out []bus.Tool
	for _, n := range names {
		out = append(out, bus.Tool{Name: server + "_" + n, Server: server, OriginalName: n})
	}
	return out
}

// fakeTools is every tool of the fake server.
func fakeTools(server string) []bus.Tool {
	return tools(server, "echo", "whoami", "fail", "crash", "spawn", "escape", "probe", "sleep", "block", "progress", "content")
}

func testBinary(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// stdioServer is the JSON of a stdio server entry running the fake, and
// the fake's record file. extra is merged into the entry.
func stdioServer(t testing.TB, extra string) (string, string) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "records.jsonl")
	entry := fmt.Sprintf(`{"command": %q, "env": {"TOOLCALL_FAKE": "stdio", "FAKE_RECORD": %q, "FAKE_STDERR_MARK": "mark-%s"}`, testBinary(t), rec, t.Name())
	if extra != "" {
		entry += ", " + extra
	}
	return entry + "}", rec
}

func httpServerJSON(url, extra string) string {
	entry := fmt.Sprintf(`{"type": "http", "url": %q`, url)
	if extra != "" {
		entry += ", " + extra
	}
	return entry + "}"
}

func cfgOf(servers map[string]string, extraTop string) string {
	var parts []string
	for name, entry := range servers {
		parts = append(parts, fmt.Sprintf("%q: %s", name, entry))
	}
	top := `{"mcpServers": {` + strings.Join(parts, ", ") + `}`
	if extraTop != "" {
		top += ", " + extraTop
	}
	return top + "}"
}
