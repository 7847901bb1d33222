package api_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlite"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/api"
)

// Keys used by the tests that configure API keys.
const (
	adminKey = "admin-key-0001"
	aliceKey = "alice-key-0002"
	bobKey   = "bob-key-0003"
)

func keySum(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }

// testKeys: root is an admin, alice and bob are users.
func testKeys() []config.APIKey {
	return []config.APIKey{
		{SHA256: keySum(adminKey), UserID: "root", Role: "admin"},
		{SHA256: keySum(aliceKey), UserID: "alice", Role: "user"},
		{SHA256: keySum(bobKey), UserID: "bob", Role: "user"},
	}
}

// options configures startWith.
type options struct {
	// noSealer runs without a credentials key (by default tests have one).
	noSealer  bool
	keys      []config.APIKey
	store     store.Store
	configDoc string // the extensions file's initial content
	// personal is config.yaml's personal_connections (zero: stdio off).
	personal config.PersonalConnections
	// readTimeout, maxPersonal and origins set the matching Config fields.
	readTimeout time.Duration
	maxPersonal int
	origins     []string
	// callDelay makes the tools.call responder a slow upstream.
	callDelay time.Duration
	// beforeCall, when set, runs in the tools.call responder before it
	// answers (a test holds a call in flight with it).
	beforeCall func()
	// callContent, when set, is the content of demo_echo's reply.
	callContent []json.RawMessage
	mcp         api.MCPConfig
	// tools replaces the catalog the mcpbus.tools.list responder returns
	// (bind: every tool not deferred).
	tools []bus.Tool
	// audit writes config change records to the audit stream (and, with
	// auditDB, to that table too).
	audit   bool
	auditDB audit.Table
	// resetUnavailable makes the cache reset responder refuse as
	// discovery does when the KV bucket cannot be written.
	resetUnavailable bool
	// maxBody is api.max_body_bytes (default 64 KiB).
	maxBody int64
	// signInFailures is api.console.sign_in_failures (default 10), clock
	// the api's clock (default time.Now).
	signInFailures int
	clock          func() time.Time
}

// env is a running api service with responders standing in for the
// services behind it.
type env struct {
	bus    *testkit.Bus
	base   string
	stop   func() // stops the first api service
	opts   options
	cfg    string
	log    *testkit.SyncBuffer
	resets atomic.Int64
	// bodies collects every response body this env returned.
	mu     sync.Mutex
	bodies []string
}

func start(t *testing.T, keys []config.APIKey) *env {
	t.Helper()
	return startWith(t, options{keys: keys})
}

func startWith(t testing.TB, o options) *env {
	t.Helper()
	b := testkit.StartBus(t)
	peer := b.Connect(t)
	e := &env{bus: b, log: &testkit.SyncBuffer{}}
	respond := func(subject string, fn func(m *nats.Msg) any) {
		if _, err := peer.Subscribe(subject, func(m *nats.Msg) {
			switch v := fn(m).(type) {
			case *bus.Error:
				body, _ := json.Marshal(bus.ErrorReply{Error: v})
				r := nats.NewMsg(m.Reply)
				r.Data = body
				r.Header.Set(bus.HeaderError, string(v.Code))
				_ = m.RespondMsg(r)
			default:
				body, _ := json.Marshal(v)
				_ = m.Respond(body)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	respond(b.Names.ToolsList(), func(m *nats.Msg) any {
		var req bus.ToolsListRequest
		_ = json.Unmarshal(m.Data, &req)
		if o.tools != nil {
			bind := []string{}
			for _, t := range o.tools {
				if !t.Deferred || slices.Contains(req.Promoted, t.Name) {
					bind = append(bind, t.Name)
				}
			}
			return bus.ToolsListReply{Tools: o.tools, Bind: bind, RoutingHints: "<mcp_routing_hints>for " + req.UserID + "</mcp_routing_hints>"}
		}
		return bus.ToolsListReply{Tools: []bus.Tool{{Name: "demo_echo", Server: "demo", OriginalName: "echo"}}, Bind: []string{"demo_echo"}, Promoted: []string{req.UserID}}
	})
	respond(b.Names.ToolsCall(), func(m *nats.Msg) any {
		if o.callDelay > 0 {
			<-time.After(o.callDelay) // a slow upstream, not synchronisation
		}
		if o.beforeCall != nil {
			o.beforeCall()
		}
		var req bus.Call
		_ = json.Unmarshal(m.Data, &req)
		for _, t := range o.tools {
			if t.Name == req.Tool && t.Deferred && !slices.Contains(req.Promoted, t.Name) {
				return bus.Errorf(bus.CodeToolDeferred, "tool '%s' is deferred", req.Tool)
			}
			if t.Name == req.Tool && t.Deferred {
				return bus.ToolsCallReply{Tool: req.Tool, Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"deferred ran"}`)}}
			}
		}
		if req.Tool == "demo_flooded" {
			// toolcall's answer past a cap on calls in flight.
			return bus.Errorf(bus.CodeRateLimited, "too many tool calls in flight for user '%s': limits.max_calls_in_flight_per_user is 64", req.UserID)
		}
		if req.Tool != "demo_echo" {
			return bus.Errorf(bus.CodeNotFound, "tool '%s' is not in the catalog", req.Tool)
		}
		if o.callContent != nil {
			return bus.ToolsCallReply{Tool: req.Tool, Server: "demo", Content: o.callContent}
		}
		return bus.ToolsCallReply{Tool: req.Tool, Server: "demo", Content: []json.RawMessage{json.RawMessage(`{"type":"text","text":"` + req.UserID + `"}`)}}
	})
	// tools.search: "select:<name>" finds that tool of o.tools and promotes it when deferred.
	respond(b.Names.ToolsSearch(), func(m *nats.Msg) any {
		var req bus.ToolsSearchRequest
		_ = json.Unmarshal(m.Data, &req)
		reply := bus.ToolsSearchReply{Tools: []bus.Tool{}, Promoted: append([]string{}, req.Promoted...)}
		for _, t := range o.tools {
			if "select:"+t.Name == req.Query {
				reply.Tools = append(reply.Tools, t)
				if t.Deferred && !slices.Contains(reply.Promoted, t.Name) {
					reply.Promoted = append(reply.Promoted, t.Name)
				}
			}
		}
		if len(reply.Tools) == 0 {
			reply.Message = "no tool matches"
		}
		return reply
	})
	respond(b.Names.CacheReset(), func(*nats.Msg) any {
		if o.resetUnavailable {
			err := bus.Errorf(bus.CodeUnavailable, "the cache was not reset: the shared state in NATS JetStream cannot be written right now (no replica was reset); retry in 2 seconds")
			err.Details = map[string]any{"retry_after_seconds": 2}
			return err
		}
		n := e.resets.Add(1)
		return bus.CacheResetReply{Success: true, Message: "reset", Scope: "shared_config", Generation: n}
	})
	tasks := func(m *nats.Msg) any {
		var req bus.TaskListRequest
		_ = json.Unmarshal(m.Data, &req)
		if req.TaskID != "" && req.TaskID != "mcp-task-1" {
			return bus.Errorf(bus.CodeNotFound, "MCP task not found")
		}
		status := "working"
		if m.Subject == b.Names.TasksCancel() {
			status = "cancel:" + req.UserID
		}
		if m.Subject == b.Names.TasksList() {
			return bus.TaskListReply{Tasks: []bus.TaskItem{{TaskID: fmt.Sprintf("%s/%s/%d", req.UserID, req.ThreadID, req.Limit)}}}
		}
		return bus.TaskDetail{TaskItem: bus.TaskItem{TaskID: req.TaskID, Status: status}}
	}
	respond(b.Names.TasksList(), tasks)
	respond(b.Names.TasksGet(), tasks)
	respond(b.Names.TasksCancel(), tasks)
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	e.cfg = filepath.Join(t.TempDir(), "extensions_config.json")
	doc := cmp.Or(o.configDoc, `{"mcpServers": {"demo": {"command": "demo"}}}`)
	if err := os.WriteFile(e.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	e.opts = o
	e.base, e.stop = e.runAPI(t)
	return e
}

// addReplica runs another api service on e's bus (its own NATS
// connection, the same config file and keys) and returns its base URL.
func (e *env) addReplica(t *testing.T) string {
	t.Helper()
	base, _ := e.runAPI(t)
	return base
}

// runAPI runs an api service on e's bus until the test ends (or stop) and
// waits until it is ready.
func (e *env) runAPI(t testing.TB) (base string, stop func()) {
	t.Helper()
	o := e.opts
	log := slog.New(slog.NewTextHandler(io.MultiWriter(e.log, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	var aw *audit.Writer
	if o.audit {
		w, err := audit.NewWriter(context.Background(), e.bus.Connect(t), e.bus.Names, audit.WriterOptions{Settings: config.DefaultAudit(), Log: log, DB: o.auditDB})
		if err != nil {
			t.Fatal(err)
		}
		aw = w
	}
	svc, err := api.New(api.Config{Listen: "127.0.0.1:0", Keys: o.keys, MaxBodyBytes: cmp.Or(o.maxBody, 64<<10), ExtensionsPath: e.cfg,
		PublishInterval: 50 * time.Millisecond, Personal: launchpolicy.PersonalOptions{Settings: o.personal},
		ReadTimeout: o.readTimeout, MaxPersonalPerUser: o.maxPersonal, AllowedOrigins: o.origins, MCP: o.mcp, SignInFailures: o.signInFailures},
		api.Deps{Log: log, NC: e.bus.Connect(t), Names: e.bus.Names, KV: e.bus.KV, Store: o.store, Sealer: testSealer(t, o.noSealer), Audit: aw, Clock: o.clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := testkit.Receive(t, 60*time.Second, "the api Run to return after its context was cancelled", done); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	base = "http://" + svc.Addr()
	testkit.Eventually(t, 10*time.Second, "api readiness", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base, stop
}

// raw sends a request and returns the status and body.
func (e *env) raw(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/json") // a bodiless POST too
	}
	return e.send(t, req)
}

// send sends req and returns the status and body, recorded in bodies.
func (e *env) send(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	e.mu.Lock()
	e.bodies = append(e.bodies, string(out))
	e.mu.Unlock()
	return resp.StatusCode, out
}

// do sends a request and decodes a JSON object reply.
func (e *env) do(t *testing.T, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	status, raw := e.raw(t, method, path, key, body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	return status, out
}

func (e *env) allBodies() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.bodies, "\n")
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// sqliteStore migrates and opens a fresh SQLite database for one test.
func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcpbus.db")
	if _, err := sqlite.Migrate(t.Context(), path, nil); err != nil {
		t.Fatalf("sqlite migrate: %v", err)
	}
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("sqlite open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// postgresStore is testkit.PostgresStore with a small pool.
func postgresStore(t *testing.T) store.Store {
	t.Helper()
	return testkit.PostgresStore(t, map[string]string{"pool_max_conns": "4"})
}

// backends are the real stores the personal connection tests run on.
var backends = map[string]func(t *testing.T) store.Store{"sqlite": sqliteStore, "postgres": postgresStore}

// testSealer is a credentials key for the test (nil when none is wanted).
func testSealer(t testing.TB, none bool) *crypto.Sealer {
	t.Helper()
	if none {
		return nil
	}
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := crypto.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rawWith sends a request with the given headers ("Host" sets the Host
// header) and no others, and returns the status and body.
func (e *env) rawWith(t *testing.T, method, path string, hdr map[string]string, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	status, raw := e.send(t, req)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	return status, out
}
