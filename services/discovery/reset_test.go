package discovery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// readyEvent reports whether evs announce server ready in generation gen.
func readyEvent(evs []bus.CatalogEvent, server string, gen int64) bool {
	for _, ev := range evs {
		if ev.Server == server && ev.Generation == gen {
			return true
		}
	}
	return false
}

// TestResetWithASlowUpstream, as an operator sees it: two demo servers over
// stdio, "fast" and "slow"; slow's next initialize is held (a gate file,
// as an npx server fetching its package would be slow). A cache reset
// answers at once with the next generation, the catalog is read at once
// and still lists slow's tools (its previous entry), fast's list_changed
// (its catalog event) arrives while slow is still initializing, and
// slow's arrives once slow is ready. Generations strictly increase.
func TestResetWithASlowUpstream(t *testing.T) {
	t.Parallel()
	demo := testkit.DemoServer(t)
	gate := filepath.Join(t.TempDir(), "gate")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, fmt.Sprintf(`{"mcpServers": {
		"fast": {"command": %q},
		"slow": {"command": %q, "args": ["-init-gate", %q], "session_init_timeout": 600}}}`, demo, demo, gate))
	before := listUntil(t, b, "both servers discovered", func(r bus.ToolsListReply) bool {
		return hasTool(r, "fast_echo") && hasTool(r, "slow_echo")
	})
	events := watchCatalogEvents(t, b)

	// The slow server's next initialize waits for the gate.
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	r := reset(t, b)
	if !r.Success || r.Generation <= before.Generation {
		t.Fatalf("reset reply %+v; want success and a generation above %d", r, before.Generation)
	}
	gen := r.Generation
	// The catalog of the new generation is served at once: slow's
	// previous tools stand while it is rediscovered.
	after := mustList(t, b)
	if after.Generation != gen || !hasTool(after, "fast_echo") || !hasTool(after, "slow_echo") || len(after.FailedServers) != 0 {
		t.Fatalf("catalog after the reset: generation %d (want %d), tools %v, failed %v", after.Generation, gen, names(after), after.FailedServers)
	}
	testkit.Eventually(t, 30*time.Second, "fast's readiness event", func() bool { return readyEvent(events(), "fast", gen) })
	if readyEvent(events(), "slow", gen) {
		t.Fatal("slow announced ready while its initialize is still held")
	}
	if st := serverState(t, b, "slow"); st != bus.ServerStateOK {
		t.Errorf("slow's state during its rediscovery = %q, want its previous entry (ok)", st)
	}

	// Slow becomes ready: its own event follows.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "slow's readiness event", func() bool { return readyEvent(events(), "slow", gen) })

	if next := reset(t, b).Generation; next <= gen {
		t.Errorf("second reset's generation %d, want above %d", next, gen)
	}
}

// serverState is server's state in the discovery's status report, without
// a lookup.
func serverState(t *testing.T, b *testkit.Bus, server string) string {
	t.Helper()
	for _, st := range servers(t, b, bus.ServersRequest{NoRefresh: true}).Servers {
		if st.Name == server {
			return st.State
		}
	}
	t.Fatalf("server %s not in the status report", server)
	return ""
}

// TestResetWithoutAKVLeaderAnswersUnavailable, as an operator sees it: the
// NATS server holding the KV bucket goes away (its JetStream has no
// leader). A cache reset then answers unavailable with a retry hint, never
// a success; once the server is back a reset succeeds with a generation
// above every earlier one.
func TestResetWithoutAKVLeaderAnswersUnavailable(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)  // requests
	kv := testkit.StartBus(t) // the shared state's buckets, on a server this test stops
	kv.PublishExtensions(t, `{"mcpServers": {}}`)
	runServiceDeps(t, b, discovery.Config{}, discovery.Deps{JS: kv.JS, KV: kv.KV, PresenceKV: kv.Presence})

	first, err := resetReq(t, b)
	if err != nil || !first.Success || first.Generation != 1 {
		t.Fatalf("reset with the bucket up: %+v, %v; want generation 1", first, err)
	}
	if a := first.Acknowledged["discovery"]; a.Replicas != 1 || a.Acknowledged != 1 {
		t.Errorf("acknowledgements %+v; want the one discovery replica", first.Acknowledged)
	}

	kv.Stop()
	r, err := resetReq(t, b)
	if err == nil {
		t.Fatalf("reset without a KV leader answered %+v; want unavailable", r)
	}
	be := bus.AsError(err)
	if be.Code != bus.CodeUnavailable || !strings.Contains(be.Message, "not reset") || be.Details["retry_after_seconds"] == nil {
		t.Fatalf("reset without a KV leader: %s %q details %v; want unavailable, saying nothing was reset, with a retry hint", be.Code, be.Message, be.Details)
	}

	kv.Start(t)
	var next bus.CacheResetReply
	testkit.Eventually(t, 60*time.Second, "a reset to succeed once the KV server is back", func() bool {
		r, err := resetReq(t, b)
		next = r
		return err == nil
	})
	if !next.Success || next.Generation <= first.Generation {
		t.Errorf("reset after the outage: %+v; want a generation above %d", next, first.Generation)
	}
}

// resetReq asks for a cache reset and returns the reply or the error.
func resetReq(t *testing.T, b *testkit.Bus) (bus.CacheResetReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Request[bus.CacheResetReply](ctx, b.NC, b.Names.CacheReset(), bus.CacheResetRequest{Reason: "test"})
}
