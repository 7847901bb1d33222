package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// noWarm turns the background warm-up off, for tests that count lookups.
var noWarm = discovery.Config{NoWarmUp: true}

// loopbackEgress lets personal connections reach the tests' servers on
// 127.0.0.1, which the egress policy refuses by default.
var loopbackEgress = config.Upstream{Egress: config.EgressSettings{Allow: []string{"127.0.0.1"}}}

// personalNoWarm is noWarm for tests whose personal connections point at
// the tests' own servers.
var personalNoWarm = discovery.Config{NoWarmUp: true, Upstream: loopbackEgress}

// start runs a discovery service on its own bus with the given config.
func start(t *testing.T, cfgJSON string) *testkit.Bus {
	t.Helper()
	return startWith(t, cfgJSON, discovery.Config{})
}

// startWith runs a discovery service with cfg on a fresh bus that already
// holds cfgJSON as the shared config.
func startWith(t *testing.T, cfgJSON string, cfg discovery.Config) *testkit.Bus {
	t.Helper()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, cfgJSON)
	runService(t, b, cfg)
	return b
}

// runService runs one discovery replica on b until the test ends.
func runService(t *testing.T, b *testkit.Bus, cfg discovery.Config) {
	t.Helper()
	runServiceWith(t, b, cfg, nil)
}

// runServiceWith is runService for a process started with the config
// file local (nil: none).
func runServiceWith(t *testing.T, b *testkit.Bus, cfg discovery.Config, local *config.Extensions) {
	t.Helper()
	runServiceLogged(t, b, cfg, local, testLog(t))
}

// runServiceLogged is runServiceWith logging to log.
func runServiceLogged(t *testing.T, b *testkit.Bus, cfg discovery.Config, local *config.Extensions, log *slog.Logger) {
	t.Helper()
	runServiceDeps(t, b, cfg, discovery.Deps{Log: log, LocalExtensions: local})
}

// runServiceDeps runs one discovery replica with deps (its connection
// from b, and its JS, KV and presence bucket from b unless set; a nil Log
// logs as testLog does).
func runServiceDeps(t *testing.T, b *testkit.Bus, cfg discovery.Config, deps discovery.Deps) {
	t.Helper()
	deps.NC, deps.Names = b.Connect(t), b.Names
	if deps.JS == nil {
		deps.JS = b.JS
	}
	if deps.KV == nil {
		deps.KV = b.KV
	}
	if deps.PresenceKV == nil {
		deps.PresenceKV = b.Presence
	}
	if deps.Log == nil {
		deps.Log = testLog(t)
	}
	svc, err := discovery.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := testkit.Receive(t, 60*time.Second, "discovery Run to return after its context was cancelled", done); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	testkit.Eventually(t, 10*time.Second, "discovery health", func() bool {
		h, err := bus.Request[bus.HealthReply](context.Background(), b.NC, b.Names.Health(bus.ServiceDiscovery), struct{}{})
		return err == nil && h.Ready
	})
}

// testLog discards logs unless MCPBUS_TEST_LOG is set; then it logs
// through t until the test ends.
func testLog(t *testing.T) *slog.Logger {
	if os.Getenv("MCPBUS_TEST_LOG") == "" {
		return observability.Discard()
	}
	return testkit.Logger(t)
}

func list(t *testing.T, b *testkit.Bus) (bus.ToolsListReply, error) {
	t.Helper()
	return listReq(t, b, bus.ToolsListRequest{})
}

func listReq(t *testing.T, b *testkit.Bus, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.ToolsList(), req)
}

// mustList lists and fails the test on error.
func mustList(t *testing.T, b *testkit.Bus) bus.ToolsListReply {
	t.Helper()
	r, err := list(t, b)
	if err != nil {
		t.Fatalf("tools.list: %v", err)
	}
	return r
}

// listUntil lists until cond holds for a successful reply.
func listUntil(t *testing.T, b *testkit.Bus, what string, cond func(bus.ToolsListReply) bool) bus.ToolsListReply {
	t.Helper()
	var last bus.ToolsListReply
	testkit.Eventually(t, 20*time.Second, what, func() bool {
		r, err := list(t, b)
		if err != nil {
			return false
		}
		last = r
		return cond(r)
	})
	return last
}

func servers(t *testing.T, b *testkit.Bus, req bus.ServersRequest) bus.ServersReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := bus.Request[bus.ServersReply](ctx, b.NC, b.Names.InternalServers(), req)
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	return r
}

func reset(t *testing.T, b *testkit.Bus) bus.CacheResetReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := bus.Request[bus.CacheResetReply](ctx, b.NC, b.Names.CacheReset(), bus.CacheResetRequest{Reason: "test"})
	if err != nil {
		t.Fatalf("cache reset: %v", err)
	}
	return r
}

func names(r bus.ToolsListReply) []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	return out
}

func hasTool(r bus.ToolsListReply, name string) bool { return slices.Contains(names(r), name) }

func findTool(t *testing.T, r bus.ToolsListReply, name string) bus.Tool {
	t.Helper()
	for _, tl := range r.Tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("tool %s not in %v", name, names(r))
	return bus.Tool{}
}

func failedNames(r bus.ToolsListReply) []string {
	var out []string
	for _, f := range r.FailedServers {
		out = append(out, f.Server)
	}
	slices.Sort(out)
	return out
}

// httpServer renders one http server entry.
func httpServer(url string, extra string) string {
	if extra != "" {
		extra = ", " + extra
	}
	return fmt.Sprintf(`{"type": "http", "url": %q%s}`, url, extra)
}

// serveTokens answers mcpbus.internal.token as the tokens service would,
// always with the header value, and returns the requests it got so far.
func serveTokens(t *testing.T, b *testkit.Bus, value string) (requests func() []bus.TokenRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []bus.TokenRequest
	nc := b.Connect(t)
	sub, err := nc.Subscribe(b.Names.InternalToken(), func(m *nats.Msg) {
		var req bus.TokenRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		body, _ := json.Marshal(bus.TokenReply{Header: "Authorization", Value: value, ExpiresAt: time.Now().Add(time.Hour)})
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []bus.TokenRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]bus.TokenRequest(nil), got...)
	}
}
