package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// fakeCommand is the bare name under which personal stdio connections run
// the fake (a symlink to the test binary on the definition's PATH): the
// launch policy only admits bare, allowlisted names.
const fakeCommand = "toolcall-fake"

// fakeAPI stands in for the api service on the contract of
// pkg/bus/personal.go: it answers mcpbus.internal.personal from per-user
// connections (runtime names from bus.PersonalRuntimeName) and publishes the
// change events the api publishes. tools is what the discovery stand-in
// adds to a user's catalog: the fake's tools of each of that user's
// connections, prefixed with the runtime name.
type fakeAPI struct {
	names bus.Names
	nc    *nats.Conn
	sub   *nats.Subscription

	mu           sync.Mutex
	conns        map[string][]bus.PersonalServer // by user, ordered by name
	fail         *bus.Error                      // when set, every request fails with it
	catalogUsers []string                        // user ids the catalog was asked for
	reads        int                             // requests answered (or failed)
}

// personalReads is how many times the connections were asked for.
func (a *fakeAPI) personalReads() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reads
}

func newFakeAPI() *fakeAPI { return &fakeAPI{conns: map[string][]bus.PersonalServer{}} }

// attach starts answering on b.
func (a *fakeAPI) attach(t *testing.T, b *testkit.Bus) {
	t.Helper()
	a.nc, a.names = b.Connect(t), b.Names
	sub, err := a.nc.Subscribe(b.Names.InternalPersonal(), a.handle)
	if err != nil {
		t.Fatal(err)
	}
	a.sub = sub
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (a *fakeAPI) handle(m *nats.Msg) {
	var req bus.PersonalServersRequest
	_ = json.Unmarshal(m.Data, &req)
	a.mu.Lock()
	a.reads++
	fail := a.fail
	reply := bus.PersonalServersReply{UserID: req.UserID, Servers: append([]bus.PersonalServer{}, a.conns[req.UserID]...)}
	a.mu.Unlock()
	if fail != nil {
		out := nats.NewMsg(m.Reply)
		out.Header.Set(bus.HeaderError, string(fail.Code))
		out.Data, _ = json.Marshal(bus.ErrorReply{Error: fail})
		_ = m.RespondMsg(out)
		return
	}
	body, _ := json.Marshal(reply)
	_ = m.Respond(body)
}

// put creates or replaces user's connection name, announces the change and
// returns the runtime name.
func (a *fakeAPI) put(t *testing.T, user, name, definition string) string {
	t.Helper()
	rt, err := bus.PersonalRuntimeName(user, name, json.RawMessage(definition))
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	list := slices.DeleteFunc(a.conns[user], func(s bus.PersonalServer) bool { return s.Name == name })
	list = append(list, bus.PersonalServer{Name: name, RuntimeName: rt, Definition: json.RawMessage(definition), UpdatedAt: time.Now().UTC()})
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	a.conns[user] = list
	a.mu.Unlock()
	a.announce(t, user)
	return rt
}

// remove deletes user's connection name and announces the change.
func (a *fakeAPI) remove(t *testing.T, user, name string) {
	t.Helper()
	a.mu.Lock()
	a.conns[user] = slices.DeleteFunc(a.conns[user], func(s bus.PersonalServer) bool { return s.Name == name })
	a.mu.Unlock()
	a.announce(t, user)
}

func (a *fakeAPI) announce(t *testing.T, user string) {
	t.Helper()
	if a.nc == nil {
		return
	}
	body, _ := json.Marshal(bus.PersonalServersRequest{UserID: user})
	if err := a.nc.Publish(a.names.PersonalEvents(user), body); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// failWith makes every request fail with err (nil: answer again).
func (a *fakeAPI) failWith(err *bus.Error) {
	a.mu.Lock()
	a.fail = err
	a.mu.Unlock()
}

// down stops answering: requests find no responder.
func (a *fakeAPI) down(t *testing.T) {
	t.Helper()
	if err := a.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// tools is the discovery stand-in: user's personal tools ("" has none).
func (a *fakeAPI) tools(user string) []bus.Tool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.catalogUsers = append(a.catalogUsers, user)
	var out []bus.Tool
	for _, s := range a.conns[user] {
		for _, t := range fakeTools(s.RuntimeName) {
			t.Personal = true // read from the personal-connection store, as discovery marks it
			out = append(out, t)
		}
	}
	return out
}

func (a *fakeAPI) askedCatalogFor(user string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.catalogUsers, user)
}

// startPersonal runs toolcall with a fake api. The catalog stand-in serves
// catalog plus the personal tools of catalogUser(user) (nil: the caller's
// own, as discovery does). With allowFake personal stdio is on with the
// fake's launch spec (fakePersonal, not as root).
func startPersonal(t *testing.T, cfg string, catalog []bus.Tool, catalogUser func(string) string, allowFake bool) (*env, *fakeAPI) {
	t.Helper()
	o := options{cfg: cfg, catalog: catalog}
	if allowFake {
		o.personal = fakePersonal(notRoot)
	}
	return startPersonalWith(t, o, catalogUser)
}

// startPersonalWith is startPersonal with options.
func startPersonalWith(t *testing.T, o options, catalogUser func(string) string) (*env, *fakeAPI) {
	t.Helper()
	a := newFakeAPI()
	o.userTools = a.tools
	o.upstream = loopbackEgress
	if catalogUser != nil {
		o.userTools = func(user string) []bus.Tool { return a.tools(catalogUser(user)) }
	}
	e := startWith(t, o)
	a.attach(t, e.bus)
	return e, a
}

// notRoot runs personal children unisolated under the test's own uid
// (launchpolicy.PersonalOptions.Unisolated): most tests are about routing,
// not isolation (see personal_isolation_test.go).
const notRoot = false

// fakeLaunchSpec admits the fake as a personal stdio server: fakeCommand
// with no argument, the fake's own variables set by the definition.
var fakeLaunchSpec = config.LaunchSpec{Name: "fake", Command: fakeCommand,
	UserEnv: []string{"TOOLCALL_FAKE", "FAKE_RECORD", "FAKE_MARK", "FAKE_STDERR_MARK", "FAKE_HANG_INIT"}}

// fakePersonal turns personal stdio on (with API keys) with fakeLaunchSpec
// and the fake's directory on the children's PATH; isolated or not.
func fakePersonal(isolated bool, specs ...config.LaunchSpec) launchpolicy.PersonalOptions {
	return launchpolicy.PersonalOptions{Keyed: true, Unisolated: !isolated, Settings: config.PersonalConnections{
		Stdio: true, Path: fakeBinDir + ":/usr/bin:/bin",
		LaunchSpecs: append([]config.LaunchSpec{fakeLaunchSpec}, specs...)}}
}

// personalStdio is a personal stdio definition running the fake under
// fakeCommand (on the gateway's PATH, see TestMain), and the fake's record
// file. extra is merged into env.
func personalStdio(t *testing.T, extraEnv string) (string, string) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "records.jsonl")
	env := fmt.Sprintf(`"TOOLCALL_FAKE": "stdio", "FAKE_RECORD": %q`, rec)
	if extraEnv != "" {
		env += ", " + extraEnv
	}
	return fmt.Sprintf(`{"type": "stdio", "command": %q, "env": {%s}}`, fakeCommand, env), rec
}

func wantCode(t *testing.T, what string, err error, code bus.Code) *bus.Error {
	t.Helper()
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != code {
		t.Fatalf("%s: err = %v, want code %s", what, err, code)
	}
	return be
}

const emptyConfig = `{"mcpServers": {}}`

// TestPersonalConnectionsRouteToTheirOwnerOnly: alice calls her stdio and
// HTTP connections (stdio in the thread workspace); bob and a caller
// without user_id get not_found and the upstreams receive nothing; the
// catalog is asked per user.
func TestPersonalConnectionsRouteToTheirOwnerOnly(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, nil, true)
	f := newHTTPFake(t, false)
	stdioDef, rec := personalStdio(t, "")
	notes := a.put(t, "alice", "notes", stdioDef)
	web := a.put(t, "alice", "web", httpServerJSON(f.URL, ""))

	r := e.mustCall(t, bus.Call{Tool: notes + "_whoami", UserID: "alice", ThreadID: "t1"})
	if r.Server != notes {
		t.Errorf("server = %q, want %q", r.Server, notes)
	}
	if w := who(t, r); filepath.Dir(w.Cwd) != filepath.Join(e.workspace, "personal") || w.Env["TMPDIR"] != filepath.Join(w.Cwd, "tmp") {
		t.Errorf("personal stdio cwd = %q, TMPDIR %q, want alice's workspace under %s/personal", w.Cwd, w.Env["TMPDIR"], e.workspace)
	}
	r = e.mustCall(t, bus.Call{Tool: web + "_echo", Arguments: json.RawMessage(`{"message":"hi"}`), UserID: "alice", ThreadID: "t1"})
	if text(t, r) != "hi" || r.Server != web {
		t.Errorf("http reply = %+v", r)
	}

	for _, user := range []string{"bob", ""} {
		for _, tool := range []string{notes + "_echo", web + "_echo"} {
			_, err := e.call(t, bus.Call{Tool: tool, Arguments: json.RawMessage(`{"message":"x"}`), UserID: user, ThreadID: "t1"})
			wantCode(t, fmt.Sprintf("user %q calls %s", user, tool), err, bus.CodeNotFound)
		}
	}
	if n := len(f.calls("tools/call")); n != 1 {
		t.Errorf("http upstream got %d tools/call, want alice's 1", n)
	}
	if n := countMethod(readRecords(t, rec), "tools/call"); n != 1 {
		t.Errorf("stdio upstream got %d tools/call, want alice's 1", n)
	}
	for _, u := range []string{"alice", "bob", ""} {
		if !a.askedCatalogFor(u) {
			t.Errorf("the catalog was never asked for user %q", u)
		}
	}
}

// TestPersonalConnectionsAreCheckedAgainstTheCaller: even when the catalog
// hands everyone alice's tools, toolcall routes a runtime name only for its
// owner: bob and a caller without user_id get not_found (a permanent error
// on mcpbus.internal.call) and the upstream receives nothing.
func TestPersonalConnectionsAreCheckedAgainstTheCaller(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, func(string) string { return "alice" }, false)
	f := newHTTPFake(t, false)
	web := a.put(t, "alice", "web", httpServerJSON(f.URL, ""))

	for _, user := range []string{"bob", ""} {
		_, err := e.call(t, bus.Call{Tool: web + "_echo", UserID: user})
		be := wantCode(t, fmt.Sprintf("user %q", user), err, bus.CodeNotFound)
		if want := "MCP server '" + web + "' is not one of your personal connections"; be.Message != want {
			t.Errorf("message = %q, want %q", be.Message, want)
		}
		_, err = internalCall(t, e, bus.InternalCallRequest{Server: web, Call: bus.Call{Tool: "echo", UserID: user, ThreadID: "t1"}})
		if !bus.IsPermanentCallError(err) {
			t.Errorf("internal call by user %q: err = %v, want a permanent call error", user, err)
		}
	}
	if got := f.all(); len(got) != 0 {
		t.Errorf("upstream received %d requests for callers who do not own it", len(got))
	}
	if _, err := e.call(t, bus.Call{Tool: web + "_echo", UserID: "alice"}); err != nil {
		t.Errorf("owner: %v", err)
	}
}

// TestPersonalEditReplacesTheRuntimeName: editing a connection gives a new
// runtime name; after the change event the old one is not_found, its
// session is closed, and the new one works. The user's unchanged
// connection keeps its session.
func TestPersonalEditReplacesTheRuntimeName(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, nil, true)
	v1, _ := personalStdio(t, `"FAKE_MARK": "v1"`)
	old := a.put(t, "alice", "notes", v1)
	keptDef, _ := personalStdio(t, `"FAKE_MARK": "kept"`)
	kept := a.put(t, "alice", "kept", keptDef)
	w1 := who(t, e.mustCall(t, bus.Call{Tool: old + "_whoami", UserID: "alice", ThreadID: "t1"}))
	if w1.Env["FAKE_MARK"] != "v1" {
		t.Fatalf("v1 env = %v", w1.Env)
	}
	keptPid := who(t, e.mustCall(t, bus.Call{Tool: kept + "_whoami", UserID: "alice", ThreadID: "t1"})).Pid

	v2, _ := personalStdio(t, `"FAKE_MARK": "v2"`)
	renamed := a.put(t, "alice", "notes", v2)
	if renamed == old {
		t.Fatal("an edited definition kept its runtime name")
	}
	testkit.Eventually(t, 10*time.Second, "the old runtime name to be not_found", func() bool {
		_, err := e.call(t, bus.Call{Tool: old + "_whoami", UserID: "alice", ThreadID: "t1"})
		return bus.AsError(err) != nil && bus.AsError(err).Code == bus.CodeNotFound
	})
	testkit.Eventually(t, 10*time.Second, "the old connection's process to be gone", func() bool { return gone(w1.Pid) })
	w2 := who(t, e.mustCall(t, bus.Call{Tool: renamed + "_whoami", UserID: "alice", ThreadID: "t1"}))
	if w2.Env["FAKE_MARK"] != "v2" || w2.Pid == w1.Pid {
		t.Errorf("new connection: pid %d (old %d), env %v", w2.Pid, w1.Pid, w2.Env)
	}
	if again := who(t, e.mustCall(t, bus.Call{Tool: kept + "_whoami", UserID: "alice", ThreadID: "t1"})).Pid; again != keptPid {
		t.Errorf("the unchanged connection's session was replaced: pid %d, then %d", keptPid, again)
	}
}

// TestPersonalAPIDownIsUnavailable: when the api cannot answer, a call of a
// personal tool is unavailable (retryable), never not_found, and an
// internal call is not a permanent error; nothing reaches the upstream.
func TestPersonalAPIDownIsUnavailable(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, nil, false)
	f := newHTTPFake(t, false)
	web := a.put(t, "carol", "web", httpServerJSON(f.URL, ""))

	check := func(what string) {
		t.Helper()
		_, err := e.call(t, bus.Call{Tool: web + "_echo", UserID: "carol"})
		be := wantCode(t, what+": tools.call", err, bus.CodeUnavailable)
		if !strings.Contains(be.Message, "personal MCP connections could not be read") {
			t.Errorf("%s: message = %q", what, be.Message)
		}
		_, err = internalCall(t, e, bus.InternalCallRequest{Server: web, Call: bus.Call{Tool: "echo", UserID: "carol", ThreadID: "t1"}})
		wantCode(t, what+": internal.call", err, bus.CodeUnavailable)
		if bus.IsPermanentCallError(err) {
			t.Errorf("%s: internal call error is permanent: %v", what, err)
		}
	}
	a.failWith(&bus.Error{Code: bus.CodeUnavailable, Message: "personal connections need a database"})
	check("api without a database")
	a.failWith(&bus.Error{Code: bus.CodeInternal, Message: "request failed"})
	check("api failing")
	a.failWith(nil)
	a.down(t)
	check("api down")
	if got := f.all(); len(got) != 0 {
		t.Errorf("upstream received %d requests", len(got))
	}
}

// TestPersonalInternalCallForDeletedConnectionFailsPermanently: the task
// poller's call of a connection deleted (or disabled) since the submit is
// a PermanentCallError after crossing the bus.
func TestPersonalInternalCallForDeletedConnectionFailsPermanently(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, nil, false)
	f := newHTTPFake(t, false)
	jobs := a.put(t, "alice", "jobs", httpServerJSON(f.URL, ""))
	poll := bus.InternalCallRequest{Server: jobs, Call: bus.Call{Tool: "echo", Arguments: json.RawMessage(`{"message":"poll"}`), UserID: "alice", ThreadID: "t1"}}
	if r, err := internalCall(t, e, poll); err != nil || len(r.Content) != 1 {
		t.Fatalf("internal call before the delete: %+v, %v", r, err)
	}

	a.remove(t, "alice", "jobs")
	var err error
	// A call racing the deletion may fail transiently (its session is being
	// closed), which the poller retries; the state to reach is permanent.
	testkit.Eventually(t, 10*time.Second, "the deleted connection to fail permanently", func() bool {
		_, err = internalCall(t, e, poll)
		return bus.IsPermanentCallError(err)
	})
	if !bus.IsPermanentCallError(err) || !errors.Is(err, bus.PermanentCallError("")) {
		t.Fatalf("err = %v, want a permanent call error", err)
	}
	// Until the change event arrives a call may still reach the upstream;
	// from the permanent error on, none does.
	reached := len(f.calls("tools/call"))
	if want := "MCP server '" + jobs + "' is not one of your personal connections"; bus.AsError(err).Message != want {
		t.Errorf("message = %q, want %q", bus.AsError(err).Message, want)
	}

	disabled := a.put(t, "alice", "paused", httpServerJSON(f.URL, `"enabled": false`))
	poll.Server = disabled
	if _, err := internalCall(t, e, poll); !bus.IsPermanentCallError(err) {
		t.Errorf("disabled connection: err = %v, want a permanent call error", err)
	}
	if _, err := internalCall(t, e, bus.InternalCallRequest{Server: jobs, Call: bus.Call{Tool: "echo", UserID: "alice", ThreadID: "t1"}}); !bus.IsPermanentCallError(err) {
		t.Errorf("deleted connection again: err = %v, want a permanent call error", err)
	}
	if n := len(f.calls("tools/call")); n != reached {
		t.Errorf("upstream got %d tools/call after the permanent error (%d before), want none", n-reached, reached)
	}
}

// TestPersonalOAuthAsksForTheOwnersToken: the token request of a personal
// connection carries its runtime name and Owner = the caller; a deployment
// server's carries no owner.
func TestPersonalOAuthAsksForTheOwnersToken(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	cfg := cfgOf(map[string]string{"shared": httpServerJSON(f.URL, oauthBlock)}, "")
	e, a := startPersonal(t, cfg, fakeTools("shared"), nil, false)
	var (
		mu   sync.Mutex
		reqs []bus.TokenRequest
	)
	nc := e.bus.Connect(t)
	if _, err := nc.Subscribe(e.bus.Names.InternalToken(), func(m *nats.Msg) {
		var req bus.TokenRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		body, _ := json.Marshal(bus.TokenReply{Header: "Authorization", Value: "Bearer for-" + req.Owner, ExpiresAt: time.Now().Add(time.Hour)})
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	web := a.put(t, "alice", "web", httpServerJSON(f.URL, oauthBlock))

	e.mustCall(t, bus.Call{Tool: web + "_echo", UserID: "alice"})
	e.mustCall(t, bus.Call{Tool: "shared_echo", UserID: "alice"})
	calls := f.calls("tools/call")
	if len(calls) != 2 || calls[0].Headers["Authorization"] != "Bearer for-alice" || calls[1].Headers["Authorization"] != "Bearer for-" {
		t.Fatalf("upstream tools/call = %+v", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 2 {
		t.Fatalf("token requests = %+v", reqs)
	}
	if reqs[0].Server != web || reqs[0].Owner != "alice" || reqs[0].ConfigFingerprint == "" {
		t.Errorf("personal token request = %+v", reqs[0])
	}
	if reqs[1].Server != "shared" || reqs[1].Owner != "" {
		t.Errorf("deployment token request = %+v", reqs[1])
	}
}

// TestPersonalStdioRunsTheLaunchPolicyAgain: a personal stdio connection
// (stored when the policy allowed it) is refused before anything is spawned
// when this toolcall's policy has personal stdio off, the default.
func TestPersonalStdioRunsTheLaunchPolicyAgain(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, nil, false)
	def, rec := personalStdio(t, "")
	notes := a.put(t, "alice", "notes", def)
	_, err := e.call(t, bus.Call{Tool: notes + "_echo", UserID: "alice"})
	be := wantCode(t, "personal stdio off", err, bus.CodeConfigError)
	if !strings.Contains(be.Message, "personal_connections.stdio is false") {
		t.Errorf("message = %q", be.Message)
	}
	if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused server was started (record file: %v)", err)
	}
}

// TestDeploymentServerNamedLikeARuntimeName: a hand-edited deployment
// server named like a personal connection's runtime name (p_ + 12 hex
// digits) is a deployment server, because whether a server is personal
// comes from where it was found (the catalog marks tools read from the
// personal-connection store), never from its name. Public and background
// calls reach it with its deployment credentials, and the personal
// connections are never read for it.
func TestDeploymentServerNamedLikeARuntimeName(t *testing.T) {
	t.Parallel()
	const name = "p_0123456789ab"
	if !bus.PersonalRuntimeNamePattern.MatchString(name) {
		t.Fatalf("%s does not look like a runtime name; the test proves nothing", name)
	}
	f := newHTTPFake(t, false)
	web := httpServerJSON(f.URL, `"user_auth": {"header": "X-User", "users": {"alice": "ua-alice"}}`)
	e, a := startPersonal(t, cfgOf(map[string]string{name: web}, ""), fakeTools(name), nil, false)

	r, err := e.call(t, bus.Call{Tool: name + "_whoami", UserID: "alice", ThreadID: "t1"})
	if err != nil {
		t.Fatalf("call of the deployment server %s: %v", name, err)
	}
	if got := lastCallHeaders(t, f)["X-User"]; got != "ua-alice" || r.IsError {
		t.Errorf("X-User = %q, want the deployment server's user_auth credential", got)
	}
	ir, err := internalCall(t, e, bus.InternalCallRequest{Server: name, Call: bus.Call{Tool: "echo", Arguments: json.RawMessage(`{"message":"poll"}`), UserID: "alice", ThreadID: "t1"}})
	if err != nil || len(ir.Content) != 1 {
		t.Fatalf("background call of the deployment server %s: %+v, %v", name, ir, err)
	}
	if n := len(f.calls("tools/call")); n != 2 {
		t.Errorf("the upstream got %d tools/call, want 2", n)
	}
	if a.personalReads() != 0 {
		t.Errorf("the personal connections were read %d times for a deployment server", a.personalReads())
	}
}
