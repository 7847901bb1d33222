package discovery_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// publishRediscover publishes n rediscovery requests for server, as
// toolcall does after an upstream's list_changed.
func publishRediscover(t *testing.T, b *testkit.Bus, n int, req bus.RediscoverRequest) {
	t.Helper()
	body, _ := json.Marshal(req)
	for range n {
		if err := b.NC.Publish(b.Names.InternalRediscover(), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
}

// addTool adds a tool to a fake at run time.
func addTool(f *fake, name string) {
	f.srv.AddTool(mcp.NewTool(name, mcp.WithDescription("added at run time")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
}

// A rediscovery request (an upstream's list_changed) rediscovers that
// server alone: its new tool is listed, the other server is not asked
// again, the generation stays, and the catalog event names the server and
// the list.
func TestRediscoveryAfterListChangedTouchesThatServerOnly(t *testing.T) {
	t.Parallel()
	fa, fb := newFake(t, tools("a", 1)...), newFake(t, tools("b", 1)...)
	b := testkit.StartBus(t)
	b.PublishExtensions(t, cfgOf(srvJSON{"a", httpServer(fa.URL, "")}, srvJSON{"b", httpServer(fb.URL, "")}))
	runService(t, b, noWarm)
	before := mustList(t, b)
	if !hasTool(before, "a_a0") || !hasTool(before, "b_b0") {
		t.Fatalf("catalog = %v", names(before))
	}
	seen := watchCatalogEvents(t, b)
	bLists := fb.lists()

	addTool(fa, "a_new")
	publishRediscover(t, b, 1, bus.RediscoverRequest{Server: "a", Lists: []string{bus.ListTools}})
	testkit.Eventually(t, 30*time.Second, "a catalog event for a's list_changed", func() bool {
		return slices.ContainsFunc(seen(), func(ev bus.CatalogEvent) bool {
			return ev.Server == "a" && slices.Equal(ev.Lists, []string{bus.ListTools}) && ev.UserID == ""
		})
	})
	after := mustList(t, b)
	if !hasTool(after, "a_a_new") || !hasTool(after, "b_b0") {
		t.Errorf("catalog after the rediscovery = %v, want a_a_new and b_b0", names(after))
	}
	if after.Generation != before.Generation {
		t.Errorf("generation %d → %d: a list_changed is not a reset", before.Generation, after.Generation)
	}
	if n := fb.lists(); n != bLists {
		t.Errorf("server b was listed again (%d → %d): only a changed", bLists, n)
	}
	// A request naming no server this deployment has changes nothing.
	publishRediscover(t, b, 1, bus.RediscoverRequest{Server: "nosuch"})
}

// An upstream flooding list_changed does not make discovery spin: a
// thousand requests for one server cost one rediscovery at once and one
// more for the rest (they are folded while it waits its turn), never
// one per request; the metric counts both outcomes.
func TestListChangedFloodIsCoalescedPerServer(t *testing.T) {
	t.Parallel()
	fa := newFake(t, tools("a", 1)...)
	reg := metrics.NewRegistry()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, cfgOf(srvJSON{"a", httpServer(fa.URL, "")}))
	runServiceDeps(t, b, noWarm, discovery.Deps{Metrics: metrics.NewDiscovery(reg)})
	mustList(t, b)
	lists := fa.lists()

	const flood = 1000
	start := time.Now()
	publishRediscover(t, b, flood, bus.RediscoverRequest{Server: "a", Lists: []string{bus.ListTools}})
	count := func(outcome string) int {
		return int(metricstest.Value(t, reg, "mcpbus_discovery_list_changed_total", map[string]string{"server": "a", "outcome": outcome}))
	}
	testkit.Eventually(t, 60*time.Second, "every request handled", func() bool {
		return count("coalesced")+count("rediscovered") == flood
	})
	runs := count("rediscovered")
	// Runs start at least a second apart (rediscoverEvery): bounded by
	// the time the flood took to handle, whatever the machine's speed.
	if most := 2 + int(time.Since(start)/time.Second); runs < 1 || runs > most {
		t.Errorf("%d rediscoveries for %d requests, want 1 to %d", runs, flood, most)
	}
	if n := fa.lists() - lists; n != runs {
		t.Errorf("the upstream was listed %d times for %d rediscoveries", n, runs)
	}
}
