package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

type env struct {
	bus       *testkit.Bus
	workspace string
	stop      func()
}

// start runs toolcall on its own bus with cfgJSON published and a catalog
// responder standing in for discovery (the bus contract, not a mock of it).
func start(t *testing.T, cfgJSON string, catalog []bus.Tool) *env {
	t.Helper()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, cfgJSON)
	catNC := b.Connect(t)
	_, err := catNC.Subscribe(bus.SubjectInternalCatalog, func(m *nats.Msg) {
		body, _ := json.Marshal(bus.ToolsListReply{Tools: catalog, CatalogHash: "test"})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	svc, err := toolcall.New(toolcall.Config{WorkspaceRoot: ws, MaxSessions: 4},
		toolcall.Deps{Log: observability.Discard(), NC: b.Connect(t), KV: b.KV})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	t.Cleanup(stop)
	testkit.Eventually(t, 10*time.Second, "toolcall health", func() bool {
		h, err := bus.Request[bus.HealthReply](context.Background(), b.NC, bus.HealthSubject(bus.ServiceToolcall), struct{}{})
		return err == nil && h.Ready
	})
	return &env{bus: b, workspace: ws, stop: stop}
}

func (e *env) call(t *testing.T, req bus.ToolsCallRequest) (bus.ToolsCallReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, bus.SubjectToolsCall, req)
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

type whoami struct {
	Cwd     string            `json:"cwd"`
	TmpDir  string            `json:"tmpdir"`
	Pid     int               `json:"pid"`
	Headers map[string]string `json:"headers"`
}

func who(t *testing.T, r bus.ToolsCallReply) whoami {
	t.Helper()
	var w whoami
	if err := json.Unmarshal(r.StructuredContent, &w); err != nil {
		t.Fatalf("whoami structured content %s: %v", r.StructuredContent, err)
	}
	return w
}

func demoTools(server string, names ...string) []bus.Tool {
	var out []bus.Tool
	for _, n := range names {
		out = append(out, bus.Tool{Name: server + "_" + n, Server: server, OriginalName: n})
	}
	return out
}

func TestStdioCallsArePooledPerThread(t *testing.T) {
	t.Parallel()
	bin := testkit.DemoServer(t)
	e := start(t, fmt.Sprintf(`{"mcpServers": {"demo": {"command": %q}}}`, bin), demoTools("demo", "echo", "whoami"))

	r, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if got := text(t, r); got != "hi" || r.Server != "demo" || r.IsError {
		t.Fatalf("reply = %+v (text %q)", r, got)
	}

	a1, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_whoami", UserID: "alice", ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_whoami", UserID: "alice", ThreadID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_whoami", UserID: "alice", ThreadID: "t2"})
	if err != nil {
		t.Fatal(err)
	}
	w1, w2, w3 := who(t, a1), who(t, a2), who(t, b1)
	if w1.Pid == 0 || w1.Pid != w2.Pid {
		t.Errorf("same thread used two processes: %d, %d", w1.Pid, w2.Pid)
	}
	if w3.Pid == w1.Pid {
		t.Errorf("two threads share process %d", w1.Pid)
	}
	wantDir := filepath.Join(e.workspace, "users", "alice", "threads", "t1", "user-data", "workspace")
	if w1.Cwd != wantDir {
		t.Errorf("cwd = %q, want %q", w1.Cwd, wantDir)
	}
	wantTmp := filepath.Join(wantDir, ".mcp", "tmp")
	if w1.TmpDir != wantTmp {
		t.Errorf("TMPDIR = %q, want %q", w1.TmpDir, wantTmp)
	}
	if st, err := os.Stat(wantTmp); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("temp dir %s: %v mode %v, want 0700", wantTmp, err, st.Mode().Perm())
	}

	// Shutdown closes every session: no child process is left.
	e.stop()
	for _, pid := range []int{w1.Pid, w3.Pid} {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool {
			return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
		})
	}
}

func TestUnknownToolIsNotFound(t *testing.T) {
	t.Parallel()
	e := start(t, `{"mcpServers": {}}`, nil)
	_, err := e.call(t, bus.ToolsCallRequest{Tool: "nope_echo"})
	if !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("err = %v, want not_found", err)
	}
}

func TestTimedOutCallClosesTheSession(t *testing.T) {
	t.Parallel()
	bin := testkit.DemoServer(t)
	e := start(t, fmt.Sprintf(`{"mcpServers": {"demo": {"command": %q, "tool_call_timeout": 0.3}}}`, bin),
		demoTools("demo", "slow", "whoami"))
	before, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_whoami"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.call(t, bus.ToolsCallRequest{Tool: "demo_slow", Arguments: json.RawMessage(`{"seconds":30}`)})
	if !errors.Is(err, bus.ErrUpstreamTimeout) {
		t.Fatalf("err = %v, want upstream_timeout", err)
	}
	after, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_whoami"})
	if err != nil {
		t.Fatalf("call after timeout: %v", err)
	}
	if who(t, before).Pid == who(t, after).Pid {
		t.Error("the session that timed out was reused")
	}
}

func TestStreamableHTTPCallAndToolError(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	e := start(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q, "headers": {"X-Static": "s1"}}}}`, hs.URL+"/mcp"),
		demoTools("web", "add", "fail", "whoami"))
	r, err := e.call(t, bus.ToolsCallRequest{Tool: "web_add", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, r); got != "5" {
		t.Errorf("add = %q", got)
	}
	if !strings.Contains(string(r.StructuredContent), `"sum":5`) {
		t.Errorf("structured content = %s", r.StructuredContent)
	}
	r, err = e.call(t, bus.ToolsCallRequest{Tool: "web_fail", Arguments: json.RawMessage(`{"message":"boom"}`)})
	if err != nil || !r.IsError || text(t, r) != "boom" {
		t.Errorf("fail = %+v, %v", r, err)
	}
	r, err = e.call(t, bus.ToolsCallRequest{Tool: "web_whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if got := who(t, r).Headers["X-Static"]; got != "s1" {
		t.Errorf("static header X-Static = %q", got)
	}
}

func TestMetadataAuthTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := start(t, `{"mcpServers": {}}`, demoTools("demo", "echo"))
	_, err := e.call(t, bus.ToolsCallRequest{Tool: "demo_echo", Metadata: json.RawMessage(`{"auth_token":"s3cret-value"}`)})
	if !errors.Is(err, bus.ErrInvalidRequest) {
		t.Fatalf("err = %v, want invalid_request", err)
	}
	if strings.Contains(err.Error(), "s3cret-value") {
		t.Errorf("error echoes the secret: %v", err)
	}
}
