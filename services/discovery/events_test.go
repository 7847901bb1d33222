package discovery_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// watchCatalogEvents collects the catalog events published on b from now
// on and returns what it collected so far.
func watchCatalogEvents(t *testing.T, b *testkit.Bus) (seen func() []bus.CatalogEvent) {
	t.Helper()
	var mu sync.Mutex
	var events []bus.CatalogEvent
	sub, err := b.NC.Subscribe(b.Names.EventsCatalog(), func(m *nats.Msg) {
		var ev bus.CatalogEvent
		if json.Unmarshal(m.Data, &ev) == nil {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := b.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []bus.CatalogEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]bus.CatalogEvent(nil), events...)
	}
}

func TestCatalogEventsAnnounceChanges(t *testing.T) {
	t.Parallel()
	fa := newFake(t, tools("a", 1)...)
	b := testkit.StartBus(t)
	seen := watchCatalogEvents(t, b)

	b.PublishExtensions(t, cfgOf(srvJSON{"a", httpServer(fa.URL, "")}))
	runService(t, b, noWarm)
	first := mustList(t, b)
	testkit.Eventually(t, 10*time.Second, "the first catalog announced", func() bool { return len(seen()) == 1 })
	if ev := seen()[0]; ev.Generation != 0 || ev.CatalogHash != first.CatalogHash || ev.Revision == "" {
		t.Errorf("event = %+v, want generation 0 and hash %s", ev, first.CatalogHash)
	}
	// An unchanged catalog is not announced again; a new routing is.
	mustList(t, b)
	b.PublishExtensions(t, cfgOf(srvJSON{"a", httpServer(fa.URL, `"routing": {"mode": "prefer", "keywords": ["x"]}`)}))
	listUntil(t, b, "the new routing", func(r bus.ToolsListReply) bool { return r.RoutingHints != "" })
	testkit.Eventually(t, 10*time.Second, "the routing change announced", func() bool { return len(seen()) == 2 })
	if a, b := seen()[0], seen()[1]; a.Revision == b.Revision {
		t.Errorf("revision did not change: %+v %+v", a, b)
	}
	// A reset announces the new generation; the server's background
	// rediscovery may announce it once more, for that server, when it ends
	// after the first announcement.
	gen := reset(t, b).Generation
	listUntil(t, b, "the new generation", func(r bus.ToolsListReply) bool { return r.Generation == gen })
	testkit.Eventually(t, 10*time.Second, "the new generation announced", func() bool {
		evs := seen()
		return len(evs) >= 3 && evs[2].Generation == gen
	})
	for _, ev := range seen()[2:] {
		if ev.Generation != gen || (ev.Server != "" && ev.Server != "a") {
			t.Errorf("after the reset: event %+v, want generation %d for the catalog or server a", ev, gen)
		}
	}
}
