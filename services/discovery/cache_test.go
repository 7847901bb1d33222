package discovery_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// srvJSON is one mcpServers entry: a name and its JSON object.
type srvJSON struct{ name, body string }

// cfgOf renders an extensions config with the servers in the given order.
func cfgOf(servers ...srvJSON) string {
	return cfgWith("", servers...)
}

// cfgWith is cfgOf with extra top-level keys (`"mcpInterceptors": [...]`).
func cfgWith(top string, servers ...srvJSON) string {
	parts := make([]string, len(servers))
	for i, s := range servers {
		parts[i] = fmt.Sprintf("%q: %s", s.name, s.body)
	}
	if top != "" {
		top += ", "
	}
	return "{" + top + `"mcpServers": {` + strings.Join(parts, ", ") + "}}"
}

// wantCounts checks how often each fake was initialized and listed.
func wantCounts(t *testing.T, when string, want map[string]int, fakes map[string]*fake) {
	t.Helper()
	for name, n := range want {
		f := fakes[name]
		if f.inits() != n || f.lists() != n {
			t.Errorf("%s: server %s initialized %d and listed %d times, want %d", when, name, f.inits(), f.lists(), n)
		}
	}
}

func TestCacheRediscoversOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	fa, fb, fc := newFake(t, tools("a", 2)...), newFake(t, tools("b", 2)...), newFake(t, tools("c", 2)...)
	fakes := map[string]*fake{"a": fa, "b": fb, "c": fc}
	a, b, c := srvJSON{"a", httpServer(fa.URL, "")}, srvJSON{"b", httpServer(fb.URL, "")}, srvJSON{"c", httpServer(fc.URL, "")}
	bus0 := start(t, cfgOf(a, b, c))

	r := mustList(t, bus0)
	if got := strings.Join(names(r), ","); got != "a_a0,a_a1,b_b0,b_b1,c_c0,c_c1" {
		t.Fatalf("catalog = %s", got)
	}
	wantCounts(t, "first lookup", map[string]int{"a": 1, "b": 1, "c": 1}, fakes)
	mustList(t, bus0)
	wantCounts(t, "second lookup", map[string]int{"a": 1, "b": 1, "c": 1}, fakes)

	// Editing b (its routing) re-discovers b only.
	b2 := srvJSON{"b", httpServer(fb.URL, `"routing": {"mode": "prefer", "keywords": ["bee"]}`)}
	bus0.PublishExtensions(t, cfgOf(a, b2, c))
	listUntil(t, bus0, "b's new routing", func(r bus.ToolsListReply) bool {
		return hasTool(r, "b_b0") && findTool(t, r, "b_b0").Routing != nil
	})
	wantCounts(t, "after editing b", map[string]int{"a": 1, "b": 2, "c": 1}, fakes)

	// Reordering only reorders.
	bus0.PublishExtensions(t, cfgOf(c, a, b2))
	listUntil(t, bus0, "c first", func(r bus.ToolsListReply) bool { return names(r)[0] == "c_c0" })
	wantCounts(t, "after reordering", map[string]int{"a": 1, "b": 2, "c": 1}, fakes)

	// Disabling c drops it; enabling it again re-discovers it.
	cOff := srvJSON{"c", httpServer(fc.URL, `"enabled": false`)}
	bus0.PublishExtensions(t, cfgOf(cOff, a, b2))
	listUntil(t, bus0, "c gone", func(r bus.ToolsListReply) bool { return !hasTool(r, "c_c0") })
	wantCounts(t, "after disabling c", map[string]int{"a": 1, "b": 2, "c": 1}, fakes)
	bus0.PublishExtensions(t, cfgOf(c, a, b2))
	listUntil(t, bus0, "c back", func(r bus.ToolsListReply) bool { return hasTool(r, "c_c0") })
	wantCounts(t, "after enabling c", map[string]int{"a": 1, "b": 2, "c": 2}, fakes)

	// Deleting a drops it and touches nobody else.
	bus0.PublishExtensions(t, cfgOf(c, b2))
	listUntil(t, bus0, "a gone", func(r bus.ToolsListReply) bool { return !hasTool(r, "a_a0") })
	wantCounts(t, "after deleting a", map[string]int{"a": 1, "b": 2, "c": 2}, fakes)

	// A reset re-discovers everything once, in the background.
	gen := reset(t, bus0).Generation
	listUntil(t, bus0, "the new generation", func(r bus.ToolsListReply) bool { return r.Generation == gen })
	testkit.Eventually(t, 20*time.Second, "b and c rediscovered", func() bool { return fb.lists() == 3 && fc.lists() == 3 })
	wantCounts(t, "after a reset", map[string]int{"a": 1, "b": 3, "c": 3}, fakes)
}

func TestCacheEveryServerFailingThenRecovering(t *testing.T) {
	t.Parallel()
	fa, fb := newFake(t, tools("a", 1)...), newFake(t, tools("b", 1)...)
	fa.mode.Store(modeFail)
	fb.mode.Store(modeFail)
	b := start(t, cfgOf(srvJSON{"a", httpServer(fa.URL, "")}, srvJSON{"b", httpServer(fb.URL, "")}))

	_, err := list(t, b)
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("every server failing: err = %v, want unavailable", err)
	}
	before := fa.inits()
	if before == 0 || fb.inits() == 0 {
		t.Fatalf("servers were not tried: a %d, b %d", before, fb.inits())
	}
	// Nothing was published, so the next lookup tries again.
	if _, err := list(t, b); !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("second lookup: err = %v, want unavailable", err)
	}
	if fa.inits() <= before {
		t.Errorf("the next lookup did not retry: a initialized %d times, before %d", fa.inits(), before)
	}
	st := servers(t, b, bus.ServersRequest{NoRefresh: true})
	if st.Error == nil || st.Error.Code != bus.CodeUnavailable {
		t.Errorf("servers error = %+v, want unavailable", st.Error)
	}
	for _, s := range st.Servers {
		if s.State != bus.ServerStateFailed || !strings.Contains(s.LastError, "'"+s.Name+"'") {
			t.Errorf("server %s: state %s, last error %q; want failed naming the server", s.Name, s.State, s.LastError)
		}
	}

	fa.mode.Store(modeOK)
	fb.mode.Store(modeOK)
	r := mustList(t, b)
	if !hasTool(r, "a_a0") || !hasTool(r, "b_b0") || len(r.FailedServers) != 0 {
		t.Errorf("after recovery: tools %v, failed %v", names(r), r.FailedServers)
	}
}

// TestCacheFailedServerIsAbsentUntilReload: until its retry is due (an
// hour here; TestFailedServerIsRetriedWithBackoffWithoutAReset covers the
// retry), a failed server is absent and only a reload brings it back.
func TestCacheFailedServerIsAbsentUntilReload(t *testing.T) {
	t.Parallel()
	fa, fb := newFake(t, tools("a", 1)...), newFake(t, tools("b", 1)...)
	a := srvJSON{"a", httpServer(fa.URL, "")}
	b := startWith(t, cfgOf(a, srvJSON{"b", httpServer(fb.URL, "")}), discovery.Config{RetryInitial: time.Hour, RetryMax: time.Hour})
	mustList(t, b)

	// b fails when it is re-discovered after an edit: it is absent, its old
	// entry dropped, a keeps its entry.
	fb.mode.Store(modeFail)
	b.PublishExtensions(t, cfgOf(a, srvJSON{"b", httpServer(fb.URL, `"description": "edited"`)}))
	r := listUntil(t, b, "b absent", func(r bus.ToolsListReply) bool { return !hasTool(r, "b_b0") })
	if !hasTool(r, "a_a0") || strings.Join(failedNames(r), ",") != "b" {
		t.Fatalf("tools %v, failed %v; want a listed and b failed", names(r), r.FailedServers)
	}
	if !strings.Contains(r.FailedServers[0].Error, "'b'") {
		t.Errorf("failure %q does not name the server", r.FailedServers[0].Error)
	}
	if fa.inits() != 1 {
		t.Errorf("a re-discovered (%d initializations) when only b changed", fa.inits())
	}
	// The published catalog stands until the next reload or b's retry: b
	// is not retried on every lookup.
	fb.mode.Store(modeOK)
	tried := fb.inits()
	r = mustList(t, b)
	if hasTool(r, "b_b0") || fb.inits() != tried {
		t.Errorf("b retried without a reload: tools %v, initializations %d → %d", names(r), tried, fb.inits())
	}
	// A reset brings it back.
	gen := reset(t, b).Generation
	listUntil(t, b, "b back after the reset", func(r bus.ToolsListReply) bool {
		return r.Generation == gen && hasTool(r, "b_b0") && len(r.FailedServers) == 0
	})
}

func TestCacheZeroToolsIsCachedSuccess(t *testing.T) {
	t.Parallel()
	empty, fa := newFake(t), newFake(t, tools("a", 1)...)
	e := srvJSON{"empty", httpServer(empty.URL, "")}
	b := start(t, cfgOf(e, srvJSON{"a", httpServer(fa.URL, "")}))
	r := mustList(t, b)
	if len(r.FailedServers) != 0 || !hasTool(r, "a_a0") {
		t.Fatalf("tools %v, failed %v", names(r), r.FailedServers)
	}
	b.PublishExtensions(t, cfgOf(e, srvJSON{"a", httpServer(fa.URL, `"description": "edited"`)}))
	testkit.Eventually(t, 20*time.Second, "a re-discovered", func() bool { _, _ = list(t, b); return fa.inits() == 2 })
	if empty.inits() != 1 {
		t.Errorf("the zero-tool server was re-discovered: %d initializations", empty.inits())
	}
	st := servers(t, b, bus.ServersRequest{})
	if s := st.Servers[0]; s.Name != "empty" || s.State != bus.ServerStateOK || s.ToolCount != 0 || s.DiscoveredAt == nil {
		t.Errorf("status of the zero-tool server = %+v, want ok with 0 tools", s)
	}
}

func TestCacheInterceptorChainChangeRediscoversAll(t *testing.T) {
	t.Parallel()
	fa, fb := newFake(t, tools("a", 1)...), newFake(t, tools("b", 1)...)
	servers := []srvJSON{{"a", httpServer(fa.URL, "")}, {"b", httpServer(fb.URL, "")}}
	b := startWith(t, cfgWith(`"mcpInterceptors": ["audit:build"]`, servers...), noWarm)
	mustList(t, b)
	b.PublishExtensions(t, cfgWith(`"mcpInterceptors": ["audit:build", "auth:build"]`, servers...))
	testkit.Eventually(t, 20*time.Second, "both re-discovered", func() bool {
		_, _ = list(t, b)
		return fa.inits() == 2 && fb.inits() == 2
	})
}

func TestCacheConcurrentLookupsShareOneDiscovery(t *testing.T) {
	t.Parallel()
	fa, fb := newFake(t, tools("a", 1)...), newFakePaged(t, 2, tools("b", 5)...)
	b := startWith(t, cfgOf(srvJSON{"a", httpServer(fa.URL, "")}, srvJSON{"b", httpServer(fb.URL, "")}), noWarm)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			r, err := list(t, b)
			if err == nil && len(r.Tools) != 6 {
				err = fmt.Errorf("%d tools: %v", len(r.Tools), names(r))
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if fa.inits() != 1 || fb.inits() != 1 {
		t.Errorf("16 concurrent cold lookups initialized a %d and b %d times, want once each", fa.inits(), fb.inits())
	}
	// b's five tools came in three pages.
	if fa.lists() != 1 || fb.lists() != 3 {
		t.Errorf("tools/list requests: a %d, b %d; want 1 and 3 (pagination)", fa.lists(), fb.lists())
	}
}
