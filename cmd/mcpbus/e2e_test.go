package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// process is a child we started and must stop.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *testkit.SyncBuffer
}

func startProcess(t *testing.T, dir, name string, bin string, args ...string) *process {
	t.Helper()
	return startProcessEnv(t, dir, name, nil, bin, args...)
}

// startProcessEnv is startProcess with extra environment variables.
func startProcessEnv(t *testing.T, dir, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(bin, args...), out: &testkit.SyncBuffer{}}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL="), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

// stop sends SIGTERM and requires a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s exited with %v", p.name, err)
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}

// testSchema is a testkit.PostgresSchema for this test.
func testSchema(t *testing.T) string {
	t.Helper()
	dsn, _ := testkit.PostgresSchema(t, nil)
	return dsn
}

func httpJSON(t *testing.T, method, u, body string) (int, map[string]any) {
	t.Helper()
	return keyedJSON(t, method, u, "", body)
}

func toolNames(body map[string]any) []string {
	var out []string
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		n, _ := m["name"].(string)
		out = append(out, n)
	}
	return out
}

// TestFiveProcessesOverRealNATSAndPostgres starts each service as its own
// process against the NATS server and PostgreSQL database CI provides, and
// makes tool calls through them over REST and over NATS (the CLI).
// natsSettings is the nats section of a test's config.yaml.
func natsSettings(url string, names bus.Names) string {
	return fmt.Sprintf("nats:\n  url: %s\n  namespace: %q\n  bind_identity: %v\n", url, names.Namespace(), names.UserSubjects())
}

// TestFiveProcessesOverRealNATSAndPostgres runs the deployment on the
// machine's NATS in a fresh namespace, so whatever other stacks left there
// (another run's configuration, generation, presence) does not reach it.
func TestFiveProcessesOverRealNATSAndPostgres(t *testing.T) {
	natsURL := envOr("TEST_NATS_URL", "nats://127.0.0.1:4222")
	names := testkit.RandomNames(t)
	dbURL := testSchema(t)
	dir := t.TempDir()

	demoPort := freePort(t)
	demo := startProcess(t, dir, "demo-http", demoBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", demoPort))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {
		"demo": {"type": "stdio", "command": %q},
		"demohttp": {"type": "http", "url": "http://127.0.0.1:%d/mcp", "task_toolsets": [
			{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}
	}}`, demoBin, demoPort)
	settings := natsSettings(natsURL, names) + fmt.Sprintf("database:\n  backend: postgres\n  url: %q\napi:\n  listen: %s\nworkspace:\n  root: %s\nmcp_tasks:\n  enabled: true\n  poll_interval_seconds: 1\n",
		dbURL, apiAddr, filepath.Join(dir, "ws"))
	if err := os.WriteFile(filepath.Join(dir, "extensions_config.json"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}

	var procs []*process
	for _, svc := range []string{"tokens", "discovery", "toolcall", "taskpoller", "api"} {
		procs = append(procs, startProcess(t, dir, svc, mcpbusBin, "serve", svc))
	}
	base := "http://" + apiAddr
	testkit.Eventually(t, 60*time.Second, "the api to be ready and the catalog to list both servers", func() bool {
		resp, err := http.Get(base + "/api/mcp/tools")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body map[string]any
		if json.NewDecoder(resp.Body).Decode(&body) != nil {
			return false
		}
		names := toolNames(body)
		return slices.Contains(names, "demo_echo") && slices.Contains(names, "demohttp_echo")
	})

	waitHealthy(t, natsURL, names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI)

	status, body := httpJSON(t, "POST", base+"/api/mcp/tools/demo_echo/call", `{"arguments":{"message":"hi"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:hi") {
		t.Fatalf("stdio call over REST: %d %v", status, body)
	}
	status, body = httpJSON(t, "POST", base+"/api/mcp/tools/demohttp_add/call", `{"arguments":{"a":2,"b":3}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:5") {
		t.Fatalf("http call over REST: %d %v", status, body)
	}

	// A durable task: submitted through the REST API, polled by the task
	// poller through toolcall, visible in the task API, announced on JetStream.
	thread := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	status, body = httpJSON(t, "POST", base+"/api/mcp/tools/demohttp_submit_report/call",
		`{"arguments":{"topic":"e2e","steps":2},"thread_id":"`+thread+`"}`)
	task, _ := body["task"].(map[string]any)
	taskID, _ := task["task_id"].(string)
	if status != 200 || task["status"] != "submitted" || !strings.HasPrefix(taskID, "mcp-task-") {
		t.Fatalf("submit over REST: %d %v", status, body)
	}
	testkit.Eventually(t, 60*time.Second, "the task to complete", func() bool {
		_, detail := httpJSON(t, "GET", base+"/api/threads/"+thread+"/mcp-tasks/"+taskID, "")
		return detail["status"] == "completed"
	})
	_, detail := httpJSON(t, "GET", base+"/api/threads/"+thread+"/mcp-tasks/"+taskID, "")
	if !strings.Contains(fmt.Sprint(detail["result"]), "report") {
		t.Errorf("completed task detail: %v", detail)
	}
	raw, _ := json.Marshal(detail)
	for _, internal := range []string{"remote_task_id", "server_name", "driver_data", "demohttp"} {
		if strings.Contains(string(raw), internal) {
			t.Errorf("task detail exposes %s: %s", internal, raw)
		}
	}
	if status, body := httpJSON(t, "GET", base+"/api/threads/"+thread+"/mcp-tasks?limit=0", ""); status != 422 {
		t.Errorf("limit=0: %d %v", status, body)
	}
	// The event is published by the poller's outbox pass after the state change.
	testkit.Eventually(t, 30*time.Second, "the task's completion event", func() bool {
		ev := lastTaskEvent(t, natsURL, names, thread)
		return ev["task_id"] == taskID && ev["status"] == "completed"
	})

	// The same over NATS through the operator CLI.
	cli := func(args ...string) string {
		cmd := exec.Command(mcpbusBin, append(args, "--nats-url", natsURL, "--namespace", names.Namespace())...)
		cmd.Dir = dir
		out, err := cmd.Output() // stdout: stderr names the deployment
		if err != nil {
			t.Fatalf("mcpbus %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := cli("tools", "list"); !strings.Contains(out, "demo_echo") || !strings.Contains(out, "demohttp_weather") {
		t.Errorf("tools list:\n%s", out)
	}
	if out := cli("call", "demo_echo", `{"message":"over nats"}`); strings.TrimSpace(out) != "over nats" {
		t.Errorf("call over NATS printed %q", out)
	}

	// Every service registered with micro, and the database was migrated.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var tables int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()
		AND table_name IN ('mcp_tasks', 'mcp_oauth_tokens', 'mcp_personal_connections')`).Scan(&tables)
	_ = conn.Close(ctx)
	if err != nil || tables != 3 {
		t.Errorf("migrated tables = %d, %v; want 3", tables, err)
	}

	// Clean shutdown in reverse order, and no stdio child left behind.
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(t)
	}
	demo.stop(t)
	testkit.Eventually(t, 10*time.Second, "no demo-server process left", func() bool {
		return len(processesRunning(demoBin)) == 0
	})
}

// waitHealthy waits until each service answers its health subject as ready.
func waitHealthy(t *testing.T, natsURL string, names bus.Names, services ...string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitHealthyOn(t, nc, names, services...)
}

// waitHealthyOn is waitHealthy on an open connection.
func waitHealthyOn(t *testing.T, nc *nats.Conn, names bus.Names, services ...string) {
	t.Helper()
	for _, svc := range services {
		testkit.Eventually(t, 60*time.Second, svc+" to be ready", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			h, err := bus.Request[bus.HealthReply](ctx, nc, names.Health(svc), struct{}{})
			return err == nil && h.Ready
		})
	}
}

// lastTaskEvent reads the newest event of a thread from the MCPBUS_EVENTS stream.
func lastTaskEvent(t *testing.T, natsURL string, names bus.Names, thread string) map[string]any {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, names.TaskEvents(thread))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("read task events of %s: %v", names.TaskEvents(thread), err)
	}
	var ev map[string]any
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// processesRunning lists pids whose executable is bin.
func processesRunning(bin string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == bin {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if !strings.Contains(string(stat), ") Z ") {
				pids = append(pids, e.Name())
			}
		}
	}
	return pids
}
