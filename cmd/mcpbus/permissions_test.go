package main_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// permNATS is nats-server (the library) running deploy/nats/accounts.conf
// as shipped, plus one test-only user (test-observer, allowed everything)
// the test watches the deployment through.
type permNATS struct {
	addr string
	pw   map[string]string // by user: "TOOLCALL", "AGENT_ALICE", ..., "OBSERVER"
	srv  *server.Server

	mu         sync.Mutex
	violations []string // the server's permission violation log lines
}

// startPermNATS starts a permNATS on a free loopback port with extra
// lines of server configuration (such as a tls block) and records the
// permission violations the server logs.
func startPermNATS(t *testing.T, extra []string) *permNATS {
	t.Helper()
	p := &permNATS{pw: permPasswords(t)}
	conf, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	const users = "    users: [\n"
	if !strings.Contains(string(conf), users) {
		t.Fatal("deploy/nats/accounts.conf: no users list to add the test observer to")
	}
	conf = []byte(strings.Replace(string(conf), users, users+"      {user: test-observer, password: $MCPBUS_NATS_OBSERVER_PASSWORD}\n", 1))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "accounts.conf"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf("jetstream {store_dir: %q}\ninclude accounts.conf\n%s\n", filepath.Join(dir, "js"), strings.Join(extra, "\n"))
	if err := os.WriteFile(filepath.Join(dir, "server.conf"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "server.conf"))
	if err != nil {
		t.Fatalf("deploy/nats/accounts.conf: %v", err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, false, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetLogger(violationLog{p}, false, false)
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	p.addr, p.srv = srv.Addr().String(), srv
	return p
}

// url is the server's URL with user's password ("" user: none).
func (p *permNATS) url(user string) string {
	if user == "" {
		return "nats://" + p.addr
	}
	return "nats://" + user + ":" + p.pw[userVar(user)] + "@" + p.addr
}

// userVar is the password key of a NATS user ("mcpbus-toolcall" →
// "TOOLCALL", "agent-alice" → "AGENT_ALICE", "test-observer" → "OBSERVER").
func userVar(user string) string {
	user = strings.TrimPrefix(strings.TrimPrefix(user, "mcpbus-"), "test-")
	return strings.ToUpper(strings.ReplaceAll(user, "-", "_"))
}

// servicesEnv is the environment that makes each service connect as its
// own user (config.NATSServicePasswordVar).
func (p *permNATS) servicesEnv() config.Env {
	vars := map[string]string{}
	for _, svc := range []string{bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI} {
		vars[config.NATSServicePasswordVar(svc)] = p.pw[userVar(svc)]
	}
	return config.EnvOf(vars)
}

// startStack runs the five services with ext on p, each connected as its
// own NATS user; the test watches as test-observer.
func (p *permNATS) startStack(t *testing.T, names bus.Names, ext string) *stack {
	t.Helper()
	return startStackWith(t, stackOptions{natsURL: p.url(""), names: names, ext: ext,
		env: p.servicesEnv(), observerURL: p.url("test-observer")})
}

// Violations returns the permission violations logged so far.
func (p *permNATS) Violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.violations)
}

// violationLog is the server's logger: it keeps the permission violations.
type violationLog struct{ p *permNATS }

func (l violationLog) record(format string, v ...any) {
	if line := fmt.Sprintf(format, v...); strings.Contains(line, "Violation") {
		l.p.mu.Lock()
		l.p.violations = append(l.p.violations, line)
		l.p.mu.Unlock()
	}
}
func (l violationLog) Noticef(format string, v ...any) { l.record(format, v...) }
func (l violationLog) Warnf(format string, v ...any)   { l.record(format, v...) }
func (l violationLog) Fatalf(format string, v ...any)  { l.record(format, v...) }
func (l violationLog) Errorf(format string, v ...any)  { l.record(format, v...) }
func (l violationLog) Debugf(format string, v ...any)  {}
func (l violationLog) Tracef(format string, v ...any)  {}

// permPasswords sets a fresh password for every NATS user of
// deploy/nats/accounts.conf (the variables it reads) and the test
// observer in the environment (before the server starts) and returns them
// by user (TOOLCALL, API, ..., AGENT_ALICE, OBSERVER).
func permPasswords(t *testing.T) map[string]string {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{}
	vars := regexp.MustCompile(`\$MCPBUS_NATS_([A-Z0-9_]+)_PASSWORD`).FindAllStringSubmatch(string(conf), -1)
	for _, who := range append(vars, []string{"", "OBSERVER"}) {
		tok, err := bus.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		pw[who[1]] = tok
		t.Setenv("MCPBUS_NATS_"+who[1]+"_PASSWORD", tok)
	}
	return pw
}

func request[Resp any](nc *nats.Conn, subject string, req any) (Resp, error) {
	return requestWithin[Resp](nc, subject, req, 30*time.Second)
}

// requestWithin is request with its own deadline: a request the server
// refuses gets no reply (only a violation on the connection), so the tests
// give those a short one and check the violation instead.
func requestWithin[Resp any](nc *nats.Conn, subject string, req any, d time.Duration) (Resp, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return bus.Request[Resp](ctx, nc, subject, req)
}

// TestNATSPermissionsBindAgentWorkersToTheirUser runs a deployment with
// nats.bind_identity on a nats-server configured with
// deploy/nats/accounts.conf and attacks it as alice's agent worker: acting
// as bob through her own subject is forbidden by the services; bob's
// subjects, the plain subjects, mcpbus.internal.> (publish and subscribe),
// the services' inboxes and the KV buckets are refused by the server.
// The trusted worker and bob's own worker see bob's task.
func TestNATSPermissionsBindAgentWorkersToTheirUser(t *testing.T) {
	p := startPermNATS(t, nil)
	pw, addr := p.pw, p.addr

	demoPort := freePort(t)
	demo := startProcess(t, t.TempDir(), "demo-http", demoBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", demoPort))
	t.Cleanup(func() { demo.stop(t) })
	ext := fmt.Sprintf(`{"mcpServers": {
		"demo": {"type": "stdio", "command": %q},
		"reports": {"type": "http", "url": "http://127.0.0.1:%d/mcp", "task_toolsets": [
			{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}
	}}`, demoBin, demoPort)
	names := bus.Names{}.WithUserSubjects(true)
	p.startStack(t, names, ext)

	trusted := testkit.ConnectNATSUser(t, "nats://"+addr, "agent-trusted", pw["AGENT_TRUSTED"], "_INBOX_agent-trusted")
	alice := testkit.ConnectNATSUser(t, "nats://"+addr, "agent-alice", pw["AGENT_ALICE"], "_INBOX_alice")
	bob := testkit.ConnectNATSUser(t, "nats://"+addr, "agent-bob", pw["AGENT_BOB"], "_INBOX_bob")

	// Bob has a task in thread th, submitted by the trusted worker for him.
	const thread = "th"
	testkit.Eventually(t, 60*time.Second, "the trusted worker to submit bob's task", func() bool {
		r, err := request[bus.ToolsCallReply](trusted.NC, names.ToolsCall(), bus.Call{
			Tool: "reports_submit_report", Arguments: []byte(`{"topic":"perm","steps":1}`), UserID: "bob", ThreadID: thread})
		return err == nil && r.Task != nil
	})
	bobsTasks := func(nc *nats.Conn, subject string, userID string) (int, error) {
		r, err := request[bus.TaskListReply](nc, subject, bus.TaskListRequest{UserID: userID, ThreadID: thread})
		return len(r.Tasks), err
	}
	if n, err := bobsTasks(trusted.NC, names.TasksList(), "bob"); err != nil || n != 1 {
		t.Fatalf("trusted worker, plain subject, user bob: %d tasks, %v", n, err)
	}
	if n, err := bobsTasks(bob.NC, names.User("bob", bus.VerbTasksList), ""); err != nil || n != 1 {
		t.Fatalf("bob's worker on his subject: %d tasks, %v", n, err)
	}

	// Alice's own subject serves alice, and only alice.
	if n, err := bobsTasks(alice.NC, names.User("alice", bus.VerbTasksList), ""); err != nil || n != 0 {
		t.Errorf("alice's worker on her subject: %d tasks, %v; want her own (none)", n, err)
	}
	for _, verb := range []bus.Verb{bus.VerbTasksList, bus.VerbTasksGet, bus.VerbTasksCancel} {
		_, err := request[bus.TaskListReply](alice.NC, names.User("alice", verb), bus.TaskListRequest{UserID: "bob", ThreadID: thread, TaskID: "mcp-task-x"})
		if !errors.Is(err, bus.ErrForbidden) {
			t.Errorf("alice's worker asking %s for bob: %v, want forbidden", verb, err)
		}
	}
	if _, err := request[bus.ToolsListReply](alice.NC, names.User("alice", bus.VerbToolsList), bus.ToolsListRequest{UserID: "bob"}); !errors.Is(err, bus.ErrForbidden) {
		t.Errorf("alice's worker listing bob's tools: %v, want forbidden", err)
	}
	if _, err := request[bus.ToolsCallReply](alice.NC, names.User("alice", bus.VerbToolsCall), bus.Call{Tool: "demo_echo", UserID: "bob", Arguments: []byte(`{"message":"x"}`)}); !errors.Is(err, bus.ErrForbidden) {
		t.Errorf("alice's worker calling as bob: %v, want forbidden", err)
	}
	if r, err := request[bus.ToolsCallReply](alice.NC, names.User("alice", bus.VerbToolsCall), bus.Call{Tool: "demo_echo", Arguments: []byte(`{"message":"as alice"}`)}); err != nil || !strings.Contains(string(r.Content[0]), "as alice") {
		t.Errorf("alice's worker calling as herself: %v %v", r, err)
	}

	// The server refuses everything else she tries.
	for _, subject := range []string{
		names.User("bob", bus.VerbTasksList), // bob's subject
		names.TasksList(),                    // the plain (trusted) subject
		names.ToolsCall(),
		names.InternalPersonal(), // decrypted personal definitions
		names.InternalCall(),
		names.InternalToken(),
	} {
		if _, err := requestWithin[bus.TaskListReply](alice.NC, subject, bus.TaskListRequest{UserID: "bob", ThreadID: thread}, 500*time.Millisecond); err == nil {
			t.Errorf("alice's worker got a reply on %s", subject)
		}
		alice.Refused(t, "publishing "+subject, subject)
	}
	for _, subject := range []string{
		names.InternalPrefix() + ">",         // receive service-to-service requests
		names.UserPrefix("bob") + ">",        // receive bob's requests
		names.ToolsCall(),                    // impersonate toolcall
		"_INBOX.>",                           // read the services' replies
		"_INBOX_bob.>",                       // read bob's replies
		"$KV." + names.ConfigBucket() + ".>", // watch the shared config
		names.ResourcesUpdated("bob"),        // hear bob's resource updates
		names.ResourcesUpdatedAll(),          // hear everyone's
	} {
		if _, err := alice.NC.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		alice.Refused(t, "subscribing to "+subject, subject)
	}
	// Her own resource updates she may hear (`mcpbus stdio` as alice).
	if _, err := alice.NC.Subscribe(names.ResourcesUpdated("alice"), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := alice.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(alice.NC)
	if err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{names.ConfigBucket(), names.PresenceBucket()} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if kv, err := js.KeyValue(ctx, bucket); err == nil {
			if _, err := kv.Get(ctx, bus.KVKeyConfig); err == nil {
				t.Errorf("alice's worker read the %s bucket", bucket)
			}
		}
		cancel()
		alice.Refused(t, "opening the "+bucket+" bucket", "$JS.API.STREAM.INFO.KV_"+bucket)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, names.EventsStream()); err == nil {
		t.Errorf("alice's worker opened the events stream")
	}
	alice.Refused(t, "opening the events stream", "$JS.API.STREAM.INFO."+names.EventsStream())
}
