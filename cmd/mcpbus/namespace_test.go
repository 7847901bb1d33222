package main_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/wiring"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// stack is the five services of one deployment running in this process
// (as `mcpbus dev` runs them), on a NATS server shared with others.
type stack struct {
	names bus.Names
	api   string // base URL
	js    jetstream.JetStream
	db    store.Store
}

// startStack runs the five services with ext as extensions_config.json, in
// namespace names, on natsURL, with SQLite in its own directory.
func startStack(t *testing.T, natsURL string, names bus.Names, ext string) *stack {
	t.Helper()
	return startStackOn(t, natsURL, names, ext, "")
}

// startStackOn is startStack on the database of databaseURL (PostgreSQL;
// "" is SQLite in the stack's own directory).
func startStackOn(t *testing.T, natsURL string, names bus.Names, ext, databaseURL string) *stack {
	t.Helper()
	return startStackWith(t, stackOptions{natsURL: natsURL, names: names, ext: ext, databaseURL: databaseURL})
}

// stackOptions: where and how a stack runs.
type stackOptions struct {
	natsURL string
	names   bus.Names
	ext     string
	// databaseURL is PostgreSQL; "" is SQLite in the stack's own directory.
	databaseURL string
	// env is the services' environment (their NATS passwords); settings
	// are extra config.yaml lines.
	env      config.Env
	settings string
	// observerURL is how the test itself connects (health checks, the
	// stack's JetStream); "" is natsURL. observerTLS secures it.
	observerURL string
	observerTLS bus.TLS
	// dbSettings are extra lines of the database block (indented two
	// spaces, such as auto_migrate).
	dbSettings string
	// apiTLS are extra lines of the api block (indented two spaces, such
	// as a tls block); with them the stack's api URL is https.
	apiTLS string
}

func startStackWith(t *testing.T, o stackOptions) *stack {
	t.Helper()
	natsURL, names, ext, databaseURL := o.natsURL, o.names, o.ext, o.databaseURL
	observerURL := cmp.Or(o.observerURL, natsURL)
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	database := fmt.Sprintf("database:\n  backend: sqlite\n  path: %s\n", filepath.Join(dir, "mcpbus.db"))
	if databaseURL != "" {
		database = fmt.Sprintf("database:\n  backend: postgres\n  url: %q\n", databaseURL)
	}
	database += o.dbSettings
	settings := natsSettings(natsURL, names) + o.settings + database + fmt.Sprintf("api:\n  listen: %s\n"+o.apiTLS+"workspace:\n  root: %s\nmcp_tasks:\n  enabled: true\n  poll_interval_seconds: 1\naudit:\n  database: true\nlog:\n  level: warn\n",
		apiAddr, filepath.Join(dir, "ws"))
	for name, content := range map[string]string{"config.yaml": settings, "extensions_config.json": ext} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := bootstrap.Load(bootstrap.Options{ConfigPath: filepath.Join(dir, "config.yaml"), ExtensionsPath: filepath.Join(dir, "extensions_config.json")}, o.env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rt.Log = testkit.Logger(t)
	if rt.Names != names {
		t.Fatalf("runtime names %q, want %q", rt.Names.Namespace(), names.Namespace())
	}
	db, err := backends.MigrateAndOpen(context.Background(), rt.Settings.Database, rt.Log)
	if err != nil {
		t.Fatal(err)
	}
	group, err := wiring.Start(context.Background(), rt, db, wiring.Order, wiring.Hooks{})
	if err != nil {
		t.Fatalf("%s: %v", names.Namespace(), err)
	}
	t.Cleanup(func() {
		if err := group.Stop(); err != nil {
			t.Errorf("%s: stop: %v", names.Namespace(), err)
		}
		_ = db.Close()
	})
	nc, err := bus.Connect(observerURL, "stack-observer", bus.Auth{TLS: o.observerTLS}, observability.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	waitHealthyOn(t, nc, names, bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI)
	scheme := "http://"
	if o.apiTLS != "" {
		scheme = "https://"
	}
	return &stack{names: names, api: scheme + apiAddr, js: js, db: db}
}

func (s *stack) tools(t *testing.T) []string {
	t.Helper()
	_, body := httpJSON(t, "GET", s.api+"/api/mcp/tools", "")
	return toolNames(body)
}

func (s *stack) generation(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, s.names.ConfigBucket())
	if err != nil {
		t.Fatal(err)
	}
	gen, _, err := bus.ReadGeneration(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// presenceKeys are the keys of the presence bucket that start with prefix
// (a group: "toolcall." for the toolcall replicas, "gen." for the
// generation acknowledgements).
func (s *stack) presenceKeys(t *testing.T, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, s.names.PresenceBucket())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// TestTwoNamespacesOnOneNATS runs two deployments in two namespaces on one
// NATS server and checks that neither sees the other's configuration,
// generation, presence, tool calls or task events, and that no message of
// either touches the default names (mcpbus.*, MCPBUS*): what a third,
// un-namespaced deployment on the same account would see.
func TestTwoNamespacesOnOneNATS(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	var (
		mu       sync.Mutex
		subjects = map[string]bool{}
	)
	spy := b.Connect(t)
	if _, err := spy.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		subjects[m.Subject] = true
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	demoPort := freePort(t)
	demo := startProcess(t, t.TempDir(), "demo-http", demoBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", demoPort))
	t.Cleanup(func() { demo.stop(t) })
	extA := fmt.Sprintf(`{"mcpServers": {
		"alpha": {"type": "stdio", "command": %q},
		"reports": {"type": "http", "url": "http://127.0.0.1:%d/mcp", "task_toolsets": [
			{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}
	}}`, demoBin, demoPort)
	extB := fmt.Sprintf(`{"mcpServers": {"beta": {"type": "stdio", "command": %q}}}`, demoBin)
	a := startStack(t, b.URL, testkit.RandomNames(t), extA)
	bb := startStack(t, b.URL, testkit.RandomNames(t), extB)

	// Configuration: each catalog is its own file's.
	testkit.Eventually(t, 60*time.Second, "both catalogs", func() bool {
		ta, tb := a.tools(t), bb.tools(t)
		return slices.Contains(ta, "alpha_echo") && slices.Contains(tb, "beta_echo")
	})
	for _, n := range a.tools(t) {
		if strings.HasPrefix(n, "beta_") {
			t.Errorf("namespace A lists B's tool %s", n)
		}
	}
	for _, n := range bb.tools(t) {
		if strings.HasPrefix(n, "alpha_") || strings.HasPrefix(n, "reports_") {
			t.Errorf("namespace B lists A's tool %s", n)
		}
	}

	// Generation: a reset in A leaves B's generation alone.
	genB := bb.generation(t)
	if status, body := httpJSON(t, "POST", a.api+"/api/mcp/cache/reset", `{}`); status != 200 {
		t.Fatalf("reset A: %d %v", status, body)
	}
	testkit.Eventually(t, 10*time.Second, "A's generation to move", func() bool { return a.generation(t) > 0 })
	if g := bb.generation(t); g != genB {
		t.Errorf("B's generation moved from %d to %d after a reset in A", genB, g)
	}

	// Presence: each toolcall replica is in its own deployment's bucket only.
	if ka, kb := a.presenceKeys(t, "toolcall."), bb.presenceKeys(t, "toolcall."); len(ka) != 1 || len(kb) != 1 || ka[0] == kb[0] {
		t.Errorf("presence keys A %v, B %v: want one replica each", ka, kb)
	}
	// Generation acknowledgements: discovery's and toolcall's, each in its
	// own deployment's bucket.
	if ka, kb := a.presenceKeys(t, "gen."), bb.presenceKeys(t, "gen."); len(ka) != 2 || len(kb) != 2 || ka[0] == kb[0] {
		t.Errorf("acknowledgement keys A %v, B %v: want discovery's and toolcall's in each", ka, kb)
	}

	// Tool calls: A's subject reaches A's servers only, over the CLI too.
	// cli returns stdout, or stdout and stderr when the command fails.
	cli := func(names bus.Names, args ...string) (string, error) {
		out, errOut, ok := runCLI(t, t.TempDir(), cleanCLIEnv(), append(args, "--nats-url", b.URL, "--namespace", names.Namespace())...)
		if !ok {
			return out + errOut, errors.New("exit status non-zero")
		}
		return out, nil
	}
	if out, err := cli(a.names, "call", "alpha_echo", `{"message":"in A"}`); err != nil || strings.TrimSpace(out) != "in A" {
		t.Errorf("call in A: %v %q", err, out)
	}
	if out, err := cli(bb.names, "call", "alpha_echo", `{"message":"in B"}`); err == nil || !strings.Contains(out, "not") {
		t.Errorf("A's tool called through B: %v %q", err, out)
	}
	if out, err := cli(bb.names, "tools", "list"); err != nil || !strings.Contains(out, "beta_echo") || strings.Contains(out, "alpha_") {
		t.Errorf("tools list in B: %v\n%s", err, out)
	}

	// Task events: A's task is announced on A's stream and nowhere in B's.
	thread := "ns-thread"
	status, body := httpJSON(t, "POST", a.api+"/api/mcp/tools/reports_submit_report/call", `{"arguments":{"topic":"ns","steps":1},"thread_id":"`+thread+`"}`)
	task, _ := body["task"].(map[string]any)
	taskID, _ := task["task_id"].(string)
	if status != 200 || taskID == "" {
		t.Fatalf("submit in A: %d %v", status, body)
	}
	testkit.Eventually(t, 60*time.Second, "A's completion event", func() bool {
		ev := lastTaskEvent(t, b.URL, a.names, thread)
		return ev["task_id"] == taskID && ev["status"] == "completed"
	})
	if ev := lastTaskEvent(t, b.URL, bb.names, thread); ev != nil {
		t.Errorf("B's events stream holds a task event of the thread: %v", ev)
	}

	// Nothing either deployment did used a default name.
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range subjects {
		if strings.HasPrefix(s, "mcpbus.") {
			t.Errorf("a namespaced deployment used the default subject %s", s)
		}
		if strings.HasPrefix(s, a.names.Root()+".") || strings.HasPrefix(s, bb.names.Root()+".") {
			continue
		}
		for _, tok := range strings.Split(s, ".") {
			if strings.HasPrefix(tok, "MCPBUS") || strings.HasPrefix(tok, "KV_MCPBUS") || strings.HasPrefix(tok, "mcpbus-") {
				t.Errorf("a namespaced deployment touched the default bucket, stream or service %q in %s", tok, s)
			}
		}
	}
	for _, want := range []string{a.names.ToolsCall(), a.names.TaskEvents(thread), "$KV." + bb.names.ConfigBucket() + "." + bus.KVKeyConfig} {
		if !subjects[want] {
			t.Errorf("the spy never saw %s (is it watching?)", want)
		}
	}
}

// TestTwoNamespacesShareOnePostgres runs two deployments in two namespaces
// on one NATS server and one PostgreSQL schema; only A has the task
// server. A's tasks are polled by A's pollers alone and complete (B's
// pollers, lacking the server, would fail them), and B's task API lists
// none of them.
func TestTwoNamespacesShareOnePostgres(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	dsn, _ := testkit.PostgresSchema(t, nil)
	demoPort := freePort(t)
	demo := startProcess(t, t.TempDir(), "demo-http", demoBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", demoPort))
	t.Cleanup(func() { demo.stop(t) })
	extA := fmt.Sprintf(`{"mcpServers": {"reports": {"type": "http", "url": "http://127.0.0.1:%d/mcp", "task_toolsets": [
			{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}}}`, demoPort)
	extB := fmt.Sprintf(`{"mcpServers": {"beta": {"type": "stdio", "command": %q}}}`, demoBin)
	a := startStackOn(t, b.URL, testkit.RandomNames(t), extA, dsn)
	bb := startStackOn(t, b.URL, testkit.RandomNames(t), extB, dsn)
	testkit.Eventually(t, 60*time.Second, "both catalogs", func() bool {
		return slices.Contains(a.tools(t), "reports_submit_report") && slices.Contains(bb.tools(t), "beta_echo")
	})

	thread := "shared-db"
	var ids []string
	for i := range 4 {
		status, body := httpJSON(t, "POST", a.api+"/api/mcp/tools/reports_submit_report/call",
			fmt.Sprintf(`{"arguments":{"topic":"t%d","steps":3},"thread_id":%q}`, i, thread))
		task, _ := body["task"].(map[string]any)
		id, _ := task["task_id"].(string)
		if status != 200 || id == "" {
			t.Fatalf("submit in A: %d %v", status, body)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		var detail map[string]any
		testkit.Eventually(t, 90*time.Second, "A's task "+id+" to end", func() bool {
			_, detail = httpJSON(t, "GET", a.api+"/api/threads/"+thread+"/mcp-tasks/"+id, "")
			return detail["status"] == "completed" || detail["status"] == "failed"
		})
		if detail["status"] != "completed" {
			t.Errorf("A's task %s ended %v: %v", id, detail["status"], detail["error"])
		}
	}
	status, list := httpJSON(t, "GET", bb.api+"/api/threads/"+thread+"/mcp-tasks", "")
	if tasks, _ := list["tasks"].([]any); status != 200 || len(tasks) != 0 {
		t.Errorf("B lists tasks of A's thread: %d %v", status, list)
	}
	status, list = httpJSON(t, "GET", a.api+"/api/threads/"+thread+"/mcp-tasks", "")
	if tasks, _ := list["tasks"].([]any); status != 200 || len(tasks) != len(ids) {
		t.Errorf("A lists %d tasks of its thread, want %d: %d %v", len(tasks), len(ids), status, list)
	}
}
