package discovery_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// serverStatus is name's entry in a no-refresh servers reply.
func serverStatus(t *testing.T, b *testkit.Bus, name string) bus.ServerStatus {
	t.Helper()
	for _, s := range servers(t, b, bus.ServersRequest{NoRefresh: true}).Servers {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("server %s not in the servers reply", name)
	return bus.ServerStatus{}
}

// TestFailedServerIsRetriedWithBackoffWithoutAReset: a server down at
// start is retried by later lookups once its backoff (5 s, doubling, capped)
// is over, never before, and found again once it is up, without a reset;
// the healthy server is never re-discovered meanwhile, and the servers view
// shows the failure count and the next retry.
func TestFailedServerIsRetriedWithBackoffWithoutAReset(t *testing.T) {
	t.Parallel()
	healthy, down := newFake(t, tools("a", 1)...), newFake(t, tools("b", 1)...)
	down.mode.Store(modeFail)
	clock := newManualClock()
	b := testkit.StartBus(t)
	events := watchCatalogEvents(t, b)
	b.PublishExtensions(t, cfgOf(srvJSON{"a", httpServer(healthy.URL, "")}, srvJSON{"b", httpServer(down.URL, "")}))
	runServiceDeps(t, b, discovery.Config{NoWarmUp: true, RetryMax: 15 * time.Second}, discovery.Deps{Clock: clock.Now})

	r := mustList(t, b)
	if !hasTool(r, "a_a0") || strings.Join(failedNames(r), ",") != "b" {
		t.Fatalf("tools %v, failed %+v; want a listed and b failed", names(r), r.FailedServers)
	}
	// wantFailed checks b's status after its n-th consecutive failure.
	wantFailed := func(n int, next time.Time) {
		t.Helper()
		st := serverStatus(t, b, "b")
		if st.State != bus.ServerStateFailed || st.ConsecutiveFailures != n || st.NextRetryAt == nil || !st.NextRetryAt.Equal(next) {
			t.Fatalf("b after %d failures: %+v (next retry %v); want failed, count %d, next retry %v", n, st, st.NextRetryAt, n, next)
		}
	}
	start := clock.Now()
	wantFailed(1, start.Add(5*time.Second))

	// Not due: lookups serve the published catalog and talk to nobody.
	tried := down.inits()
	clock.Advance(4 * time.Second)
	for range 3 {
		mustList(t, b)
	}
	if down.inits() != tried {
		t.Fatalf("b retried before its backoff was over: %d → %d initializations", tried, down.inits())
	}

	// Due: the next lookup retries b (in the background) and it fails
	// again, so the wait doubles; then it is capped at RetryMax.
	retryAt := clock.Advance(time.Second) // start + 5 s
	testkit.Eventually(t, 20*time.Second, "the second failure recorded", func() bool {
		mustList(t, b) // a lookup while the previous retry pass ends may join it
		return serverStatus(t, b, "b").ConsecutiveFailures == 2
	})
	wantFailed(2, retryAt.Add(10*time.Second))
	retryAt = clock.Advance(10 * time.Second)
	testkit.Eventually(t, 20*time.Second, "the third failure recorded", func() bool {
		mustList(t, b) // a lookup while the previous retry pass ends may join it
		return serverStatus(t, b, "b").ConsecutiveFailures == 3
	})
	wantFailed(3, retryAt.Add(15*time.Second)) // 20 s capped at 15 s

	// b comes up: the retry after the backoff finds it, and the new
	// catalog is announced like any change.
	down.mode.Store(modeOK)
	clock.Advance(15 * time.Second)
	r = listUntil(t, b, "b found again without a reset", func(r bus.ToolsListReply) bool {
		return hasTool(r, "b_b0") && len(r.FailedServers) == 0
	})
	if r.Generation != 0 {
		t.Errorf("generation %d: the retry reset the cache", r.Generation)
	}
	if st := serverStatus(t, b, "b"); st.State != bus.ServerStateOK || st.ConsecutiveFailures != 0 || st.NextRetryAt != nil {
		t.Errorf("b after recovery: %+v", st)
	}
	// (Events are published in the background, so they may arrive in
	// any order: look for the recovered catalog's hash among them.)
	testkit.Eventually(t, 10*time.Second, "the recovered catalog announced", func() bool {
		return slices.ContainsFunc(events(), func(ev bus.CatalogEvent) bool { return ev.CatalogHash == r.CatalogHash })
	})
	if healthy.inits() != 1 {
		t.Errorf("the healthy server was initialized %d times, want 1", healthy.inits())
	}
}
