package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// personalAPI stands in for the api service on mcpbus.internal.personal:
// it keeps each user's connections (runtime names derived as the api does,
// with bus.PersonalRuntimeName), answers with bus.PersonalServersReply,
// announces changes on bus.Names.PersonalEvents and counts the reads.
type personalAPI struct {
	t     *testing.T
	nc    *nats.Conn
	names bus.Names

	mu    sync.Mutex
	conns map[string]map[string]json.RawMessage // user → name → definition
	asks  map[string]int
	mute  bool // receive requests but never answer (a hung api)
	sub   *nats.Subscription
}

// newPersonalAPI returns the stand-in, not yet answering (see serve).
func newPersonalAPI(t *testing.T, b *testkit.Bus) *personalAPI {
	return &personalAPI{t: t, nc: b.Connect(t), names: b.Names, conns: map[string]map[string]json.RawMessage{}, asks: map[string]int{}}
}

// serve starts answering mcpbus.internal.personal.
func (a *personalAPI) serve() *personalAPI {
	a.t.Helper()
	sub, err := a.nc.Subscribe(a.names.InternalPersonal(), func(m *nats.Msg) {
		var req bus.PersonalServersRequest
		_ = json.Unmarshal(m.Data, &req)
		a.mu.Lock()
		a.asks[req.UserID]++
		mute := a.mute
		reply := bus.PersonalServersReply{UserID: req.UserID, Servers: []bus.PersonalServer{}}
		for name, def := range a.conns[req.UserID] {
			rt, err := bus.PersonalRuntimeName(req.UserID, name, def)
			if err != nil {
				a.t.Errorf("runtime name: %v", err)
			}
			reply.Servers = append(reply.Servers, bus.PersonalServer{Name: name, RuntimeName: rt, Definition: def, UpdatedAt: time.Now()})
		}
		a.mu.Unlock()
		if mute {
			return
		}
		sort.Slice(reply.Servers, func(i, j int) bool { return reply.Servers[i].Name < reply.Servers[j].Name })
		body, _ := json.Marshal(reply)
		_ = m.Respond(body)
	})
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		a.t.Fatal(err)
	}
	a.sub = sub
	return a
}

// put saves a connection (new or edited) without announcing it and returns
// its runtime name.
func (a *personalAPI) put(user, name, definition string) string {
	a.t.Helper()
	rt, err := bus.PersonalRuntimeName(user, name, json.RawMessage(definition))
	if err != nil {
		a.t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conns[user] == nil {
		a.conns[user] = map[string]json.RawMessage{}
	}
	a.conns[user][name] = json.RawMessage(definition)
	return rt
}

// announce publishes the change event of user, as the api does after every
// create, edit and delete.
func (a *personalAPI) announce(user string) {
	a.t.Helper()
	body, _ := json.Marshal(bus.PersonalServersRequest{UserID: user})
	if err := a.nc.Publish(a.names.PersonalEvents(user), body); err != nil {
		a.t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		a.t.Fatal(err)
	}
}

// asked is how often user's connections were read.
func (a *personalAPI) asked(user string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asks[user]
}

// listAs lists the catalog as user.
func listAs(t *testing.T, b *testkit.Bus, user string) bus.ToolsListReply {
	t.Helper()
	r, err := listReq(t, b, bus.ToolsListRequest{UserID: user})
	if err != nil {
		t.Fatalf("tools.list as %q: %v", user, err)
	}
	return r
}

// listAsUntil lists as user until cond holds.
func listAsUntil(t *testing.T, b *testkit.Bus, user, what string, cond func(bus.ToolsListReply) bool) bus.ToolsListReply {
	t.Helper()
	var last bus.ToolsListReply
	testkit.Eventually(t, 20*time.Second, what, func() bool {
		r, err := listReq(t, b, bus.ToolsListRequest{UserID: user})
		if err != nil {
			return false
		}
		last = r
		return cond(r)
	})
	return last
}

// internalCatalog asks mcpbus.internal.catalog as toolcall does.
func internalCatalog(t *testing.T, b *testkit.Bus, user string) bus.ToolsListReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.InternalCatalog(), bus.ToolsListRequest{UserID: user})
	if err != nil {
		t.Fatalf("internal catalog as %q: %v", user, err)
	}
	return r
}

// searchAs runs tools.search as user.
func searchAs(t *testing.T, b *testkit.Bus, user, query string) bus.ToolsSearchReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := bus.Request[bus.ToolsSearchReply](ctx, b.NC, b.Names.ToolsSearch(), bus.ToolsSearchRequest{Query: query, UserID: user})
	if err != nil {
		t.Fatalf("tools.search as %q: %v", user, err)
	}
	return r
}

func withPrefix(r bus.ToolsListReply, prefix string) []string {
	var out []string
	for _, n := range names(r) {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func failure(r bus.ToolsListReply, server string) (bus.FailedServer, bool) {
	for _, f := range r.FailedServers {
		if f.Server == server {
			return f, true
		}
	}
	return bus.FailedServer{}, false
}

func TestPersonalConnectionsAreTheirOwnersOnly(t *testing.T) {
	t.Parallel()
	dep, mine, raw := newFake(t, tools("d", 1)...), newFake(t, tools("p", 2)...), newFake(t, fakeTool{Name: "dep_d0"}, fakeTool{Name: "solo"})
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "mine", httpServer(mine.URL, ""))
	rtRaw := api.put("alice", "raw", httpServer(raw.URL, `"tool_name_prefix": false`))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)

	alice := listAs(t, b, "alice")
	if got := strings.Join(names(alice), ","); got != "dep_d0,"+rt+"_p0,"+rt+"_p1,solo" {
		t.Fatalf("alice's catalog = %s", got)
	}
	if len(alice.FailedServers) != 0 {
		t.Errorf("alice's failed servers = %+v", alice.FailedServers)
	}
	if p := findTool(t, alice, rt+"_p0"); p.Server != rt || p.OriginalName != "p0" {
		t.Errorf("%s_p0 routes to %s/%s, want %s/p0", rt, p.Server, p.OriginalName, rt)
	}
	// A clash is won by the deployment server; the other tool of the
	// unprefixed connection stays.
	if d := findTool(t, alice, "dep_d0"); d.Server != "dep" {
		t.Errorf("dep_d0 routes to %s; deployment servers come first", d.Server)
	}
	if s := findTool(t, alice, "solo"); s.Server != rtRaw {
		t.Errorf("solo routes to %s, want %s", s.Server, rtRaw)
	}
	for who, r := range map[string]bus.ToolsListReply{"bob": listAs(t, b, "bob"), "nobody": mustList(t, b)} {
		if got := strings.Join(names(r), ","); got != "dep_d0" || len(r.FailedServers) != 0 {
			t.Errorf("%s sees %s (failed %+v); want the deployment catalog only", who, got, r.FailedServers)
		}
	}
	if got := searchAs(t, b, "alice", "p0"); len(got.Tools) != 1 || got.Tools[0].Name != rt+"_p0" {
		t.Errorf("alice's search = %+v", got.Tools)
	}
	if got := searchAs(t, b, "bob", "p0"); len(got.Tools) != 0 {
		t.Errorf("bob's search finds alice's tools: %+v", got.Tools)
	}
	// Warm lookups read nothing again and discover nothing again.
	again := listAs(t, b, "alice")
	if again.CatalogHash != alice.CatalogHash || api.asked("alice") != 1 || mine.inits() != 1 || raw.inits() != 1 || dep.inits() != 1 {
		t.Errorf("warm lookup: hash %s→%s, alice asked %d, initialized mine %d raw %d dep %d; want 1 each",
			alice.CatalogHash, again.CatalogHash, api.asked("alice"), mine.inits(), raw.inits(), dep.inits())
	}
}

func TestPersonalEditReplacesTheRuntimeNameAfterTheEvent(t *testing.T) {
	t.Parallel()
	dep, pf := newFake(t, tools("d", 1)...), newFake(t, tools("p", 1)...)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	old := api.put("alice", "mine", httpServer(pf.URL, ""))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)
	if r := listAs(t, b, "alice"); !hasTool(r, old+"_p0") {
		t.Fatalf("alice's catalog = %v", names(r))
	}

	// Edited in the store but not announced: the cached connections stand.
	edited := api.put("alice", "mine", httpServer(pf.URL, `"description": "edited"`))
	if edited == old {
		t.Fatal("an edit kept the runtime name")
	}
	if r := listAs(t, b, "alice"); !hasTool(r, old+"_p0") || api.asked("alice") != 1 || pf.inits() != 1 {
		t.Fatalf("before the event: tools %v, asked %d, initialized %d; want the cached catalog", names(r), api.asked("alice"), pf.inits())
	}

	// The event: read once, the new runtime name discovered once, the old
	// one gone.
	api.announce("alice")
	r := listAsUntil(t, b, "alice", "the edited connection", func(r bus.ToolsListReply) bool { return hasTool(r, edited+"_p0") })
	if hasTool(r, old+"_p0") || findTool(t, r, edited+"_p0").Server != edited {
		t.Errorf("after the edit: %v", names(r))
	}
	listAs(t, b, "alice")
	if api.asked("alice") != 2 || pf.inits() != 2 || dep.inits() != 1 {
		t.Errorf("after the event: asked %d, personal initialized %d, deployment %d; want 2, 2 and 1", api.asked("alice"), pf.inits(), dep.inits())
	}
	ic := internalCatalog(t, b, "alice")
	if hasTool(ic, old+"_p0") || !hasTool(ic, edited+"_p0") {
		t.Errorf("toolcall's catalog after the edit = %v", names(ic))
	}

	// An event without a change reads again but discovers nothing.
	api.announce("alice")
	testkit.Eventually(t, 20*time.Second, "the connections read again", func() bool {
		listAs(t, b, "alice")
		return api.asked("alice") == 3
	})
	if pf.inits() != 2 {
		t.Errorf("an unchanged connection was re-discovered: %d initializations", pf.inits())
	}

	// A generation bump reads and discovers everything again, once (the
	// deployment server in the background, its previous entry served
	// meanwhile).
	gen := reset(t, b).Generation
	listAsUntil(t, b, "alice", "the new generation", func(r bus.ToolsListReply) bool { return r.Generation == gen && hasTool(r, edited+"_p0") })
	testkit.Eventually(t, 20*time.Second, "the deployment server rediscovered", func() bool { return dep.inits() >= 2 })
	listAs(t, b, "alice")
	if api.asked("alice") != 4 || pf.inits() != 3 || dep.inits() != 2 {
		t.Errorf("after a reset: asked %d, personal initialized %d, deployment %d; want 4, 3 and 2", api.asked("alice"), pf.inits(), dep.inits())
	}
}

func TestPersonalDeletedConnectionDisappears(t *testing.T) {
	t.Parallel()
	dep, pf := newFake(t, tools("d", 1)...), newFake(t, tools("p", 1)...)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "mine", httpServer(pf.URL, ""))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)
	if r := listAs(t, b, "alice"); !hasTool(r, rt+"_p0") {
		t.Fatalf("alice's catalog = %v", names(r))
	}
	api.mu.Lock()
	delete(api.conns["alice"], "mine")
	api.mu.Unlock()
	api.announce("alice")
	listAsUntil(t, b, "alice", "the deleted connection gone", func(r bus.ToolsListReply) bool {
		return strings.Join(names(r), ",") == "dep_d0" && len(r.FailedServers) == 0
	})
	// Disabled is like deleted for the catalog.
	api.put("alice", "mine", httpServer(pf.URL, `"enabled": false`))
	api.announce("alice")
	testkit.Eventually(t, 20*time.Second, "the disabled connection read", func() bool {
		r := listAs(t, b, "alice")
		return api.asked("alice") == 3 && strings.Join(names(r), ",") == "dep_d0"
	})
	if pf.inits() != 1 {
		t.Errorf("personal server initialized %d times, want 1", pf.inits())
	}
}

func TestPersonalAPIDownServesTheDeploymentCatalog(t *testing.T) {
	t.Parallel()
	dep, pf := newFake(t, tools("d", 1)...), newFake(t, tools("p", 1)...)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b)
	rt := api.put("alice", "mine", httpServer(pf.URL, ""))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	logs := &testkit.SyncBuffer{}
	runServiceLogged(t, b, personalNoWarm, nil, slog.New(slog.NewTextHandler(logs, nil)))

	// No responder at all.
	for _, r := range []bus.ToolsListReply{listAs(t, b, "alice"), internalCatalog(t, b, "alice"), listAs(t, b, "bob")} {
		f, ok := failure(r, "personal-connections")
		if strings.Join(withPrefix(r, "dep_"), ",") != "dep_d0" || !ok || !strings.Contains(f.Error, "personal MCP connections") {
			t.Errorf("api down: tools %v, failed %+v; want the deployment catalog and a personal-connections failure", names(r), r.FailedServers)
		}
	}
	// Every lookup tried the api; the log says so once, not per lookup.
	if n := strings.Count(logs.String(), "personal connections unavailable"); n != 1 {
		t.Errorf("the api-down warning was logged %d times for three lookups, want 1", n)
	}
	// Nobody else is affected and the deployment catalog stays published.
	if r := mustList(t, b); len(r.FailedServers) != 0 {
		t.Errorf("the plain catalog reports %+v", r.FailedServers)
	}

	// The failure is not cached: once the api answers, the next lookup
	// has the connection.
	api.serve()
	r := listAs(t, b, "alice")
	if !hasTool(r, rt+"_p0") || len(r.FailedServers) != 0 {
		t.Errorf("api back: tools %v, failed %+v", names(r), r.FailedServers)
	}
}

func TestPersonalAPITimeoutServesTheDeploymentCatalog(t *testing.T) {
	t.Parallel()
	dep := newFake(t, tools("d", 1)...)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b)
	api.mute = true
	api.serve()
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, discovery.Config{NoWarmUp: true, PersonalTimeout: 200 * time.Millisecond})

	r := listAs(t, b, "alice")
	f, ok := failure(r, "personal-connections")
	if !hasTool(r, "dep_d0") || !ok || !strings.Contains(f.Error, "timed out") {
		t.Errorf("hung api: tools %v, failed %+v; want the deployment catalog and a timeout", names(r), r.FailedServers)
	}
	if api.asked("alice") != 1 {
		t.Errorf("asked %d times, want 1", api.asked("alice"))
	}
}

func TestFailingPersonalServerOnlyAddsAFailure(t *testing.T) {
	t.Parallel()
	dep, down := newFake(t, tools("d", 1)...), newFake(t, tools("x", 1)...)
	down.mode.Store(modeFail)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rtDown := api.put("alice", "broken", httpServer(down.URL, ""))
	// A task toolset naming a tool the server lacks fails that connection
	// only (for a deployment server it is a config_error).
	rtTask := api.put("alice", "tasks", httpServer(demoURL(t), `"task_toolsets": [{"name": "r", "submit_tool": "submit_reprot",
		"status_tool": "get_report_status", "cancel_tool": "cancel_report"}]`))
	rtBad := api.put("alice", "bad", `{"type": "http"}`)
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)

	r := listAs(t, b, "alice")
	if strings.Join(names(r), ",") != "dep_d0" {
		t.Errorf("alice's catalog = %v", names(r))
	}
	for server, want := range map[string]string{rtDown: "'broken'", rtTask: "'submit_reprot'", rtBad: "'bad'"} {
		if f, ok := failure(r, server); !ok || !strings.Contains(f.Error, want) {
			t.Errorf("failure of %s = %+v (%v); want it to name %s", server, f, ok, want)
		}
	}
	if len(r.FailedServers) != 3 {
		t.Errorf("failed servers = %+v", r.FailedServers)
	}
	if r := listAs(t, b, "bob"); len(r.FailedServers) != 0 {
		t.Errorf("bob sees alice's failures: %+v", r.FailedServers)
	}

	// With no deployment server, a failing personal server still is no
	// unavailable catalog.
	b.PublishExtensions(t, `{"mcpServers": {}}`)
	r = listAsUntil(t, b, "alice", "the empty deployment", func(r bus.ToolsListReply) bool { return !hasTool(r, "dep_d0") })
	if len(r.Tools) != 0 || len(r.FailedServers) != 3 {
		t.Errorf("tools %v, failed %+v", names(r), r.FailedServers)
	}
}

func TestEveryDeploymentServerFailingIsUnavailableEvenWithPersonalTools(t *testing.T) {
	t.Parallel()
	dep, pf := newFake(t, tools("d", 1)...), newFake(t, tools("p", 1)...)
	dep.mode.Store(modeFail)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	api.put("alice", "mine", httpServer(pf.URL, ""))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)
	if _, err := listReq(t, b, bus.ToolsListRequest{UserID: "alice"}); !errors.Is(err, bus.ErrUnavailable) {
		t.Errorf("err = %v, want unavailable (the rule is the deployment's)", err)
	}
}

func TestInternalCatalogResolvesTheUsersPersonalTools(t *testing.T) {
	t.Parallel()
	dep := newFake(t, tools("d", 1)...)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	// A personal task toolset: its status and cancel tools are in
	// toolcall's catalog only, and personal servers never enter the drift
	// guard's startup snapshot.
	rt := api.put("alice", "reports", httpServer(demoURL(t), `"task_toolsets": [{"name": "r", "submit_tool": "submit_report",
		"status_tool": "get_report_status", "cancel_tool": "cancel_report"}]`))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)

	full := internalCatalog(t, b, "alice")
	for _, raw := range []string{"submit_report", "get_report_status", "cancel_report", "echo"} {
		if tl := findTool(t, full, rt+"_"+raw); tl.Server != rt || tl.OriginalName != raw {
			t.Errorf("%s_%s routes to %s/%s", rt, raw, tl.Server, tl.OriginalName)
		}
	}
	if !hasTool(full, "dep_d0") || len(full.FailedServers) != 0 {
		t.Errorf("toolcall's catalog for alice = %v (failed %+v)", names(full), full.FailedServers)
	}
	agent := listAs(t, b, "alice")
	if !hasTool(agent, rt+"_submit_report") || hasTool(agent, rt+"_get_report_status") {
		t.Errorf("alice's agent catalog = %v; want the submit tool only", names(agent))
	}
	for _, user := range []string{"bob", ""} {
		if got := names(internalCatalog(t, b, user)); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "p_") }) {
			t.Errorf("toolcall's catalog for %q has personal tools: %v", user, got)
		}
	}
	// toolcall's lookup of one tool (how it resolves a call) finds a
	// personal tool for its owner only, and an agent's lookup never finds
	// an internal task tool.
	status := rt + "_get_report_status"
	for _, c := range []struct {
		user, subject string
		want          int
	}{{"alice", b.Names.InternalCatalog(), 1}, {"bob", b.Names.InternalCatalog(), 0}, {"", b.Names.InternalCatalog(), 0}, {"alice", b.Names.ToolsList(), 0}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		one, err := bus.Request[bus.ToolsListReply](ctx, b.NC, c.subject, bus.ToolsListRequest{UserID: c.user, Tool: status})
		cancel()
		if err != nil || len(one.Tools) != c.want || c.want == 1 && (one.Tools[0].Name != status || one.Tools[0].Server != rt) {
			t.Errorf("lookup of %s as %q on %s: %v, %v; want %d tool(s)", status, c.user, c.subject, names(one), err, c.want)
		}
	}
	// A changed deployment config is checked against the startup snapshot
	// without alice's task server in it.
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, `"description": "edited"`)}))
	testkit.Eventually(t, 20*time.Second, "the edited deployment", func() bool {
		full = internalCatalog(t, b, "alice")
		return dep.inits() == 2
	})
	if !hasTool(full, rt+"_submit_report") {
		t.Errorf("after a deployment edit: %v", names(full))
	}
}

func TestPersonalOAuthTokenIsTheOwners(t *testing.T) {
	t.Parallel()
	secured, dep := newFakeAuth(t, "Authorization", "Bearer alice-token", tools("s", 1)...), newFake(t, tools("d", 1)...)
	b := testkit.StartBus(t)
	tokenRequests := serveTokens(t, b, "Bearer alice-token")
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "secure", httpServer(secured.URL, `"oauth": {"enabled": true, "token_url": "http://127.0.0.1:1/token",
		"grant_type": "refresh_token", "client_id": "id", "refresh_token": "seed"}`))
	b.PublishExtensions(t, cfgOf(srvJSON{"dep", httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)

	r := listAs(t, b, "alice")
	if !hasTool(r, rt+"_s0") {
		t.Fatalf("tools %v, failed %+v", names(r), r.FailedServers)
	}
	if got := tokenRequests(); len(got) != 1 || got[0].Server != rt || got[0].Owner != "alice" || got[0].ConfigFingerprint == "" {
		t.Errorf("token requests = %+v; want one for %s owned by alice", got, rt)
	}
}

// TestDeploymentServerNamedLikeARuntimeName: a hand-edited deployment
// server named like a personal connection's runtime name (p_ + 12 hex
// digits) is a deployment server: everyone's catalog has its tools, marked
// as deployment tools, while the tools read from a user's personal
// connections are marked personal (bus.Tool.Personal, what toolcall
// routes by) in the agent's and in toolcall's catalog alike.
func TestDeploymentServerNamedLikeARuntimeName(t *testing.T) {
	t.Parallel()
	const name = "p_0123456789ab"
	if !bus.PersonalRuntimeNamePattern.MatchString(name) {
		t.Fatalf("%s does not look like a runtime name; the test proves nothing", name)
	}
	dep, mine := newFake(t, tools("d", 1)...), newFake(t, tools("p", 1)...)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "mine", httpServer(mine.URL, ""))
	b.PublishExtensions(t, cfgOf(srvJSON{name, httpServer(dep.URL, "")}))
	runService(t, b, personalNoWarm)

	for who, r := range map[string]bus.ToolsListReply{
		"alice": listAs(t, b, "alice"), "alice (toolcall)": internalCatalog(t, b, "alice"),
		"bob": listAs(t, b, "bob"), "nobody": mustList(t, b),
	} {
		if d := findTool(t, r, name+"_d0"); d.Server != name || d.Personal {
			t.Errorf("%s: %s_d0 = server %s personal %v, want the deployment server", who, name, d.Server, d.Personal)
		}
		if strings.HasPrefix(who, "alice") {
			if p := findTool(t, r, rt+"_p0"); p.Server != rt || !p.Personal {
				t.Errorf("%s: %s_p0 = server %s personal %v, want alice's personal connection", who, rt, p.Server, p.Personal)
			}
		}
	}
	if api.asked("bob") != 1 {
		t.Errorf("bob's connections were asked for %d times, want 1", api.asked("bob"))
	}
}
