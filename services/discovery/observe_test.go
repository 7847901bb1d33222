package discovery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// A discovery moves its server's duration histogram; a failing server
// moves failures{server} and only that; a success sets the tool count; a
// reset moves the cache generation gauge.
func TestDiscoveryMetricsMove(t *testing.T) {
	t.Parallel()
	healthy, down := newFake(t, tools("a", 2)...), newFake(t, tools("b", 1)...)
	down.mode.Store(modeFail)
	reg := metrics.NewRegistry()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, cfgOf(srvJSON{"a", httpServer(healthy.URL, "")}, srvJSON{"b", httpServer(down.URL, "")}))
	runServiceDeps(t, b, discovery.Config{NoWarmUp: true}, discovery.Deps{Metrics: metrics.NewDiscovery(reg)})

	if r := mustList(t, b); strings.Join(failedNames(r), ",") != "b" {
		t.Fatalf("failed = %+v, want b", r.FailedServers)
	}
	if n := metricstest.Value(t, reg, "mcpbus_discovery_failures_total", map[string]string{"server": "b"}); n != 1 {
		t.Errorf("failures{b} = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_discovery_failures_total", map[string]string{"server": "a"}); n != 0 {
		t.Errorf("failures{a} = %v, want 0", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_discovery_duration_seconds", map[string]string{"server": "a", "outcome": "ok"}); n != 1 {
		t.Errorf("duration{a, ok} samples = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_discovery_duration_seconds", map[string]string{"server": "b", "outcome": "failed"}); n != 1 {
		t.Errorf("duration{b, failed} samples = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_discovery_tools", map[string]string{"server": "a"}); n != 2 {
		t.Errorf("tools{a} = %v, want 2", n)
	}
	gen := reset(t, b).Generation
	testkit.Eventually(t, 10*time.Second, "the generation gauge to follow the reset", func() bool {
		return metricstest.Value(t, reg, "mcpbus_cache_generation", map[string]string{"service": "discovery"}) == float64(gen)
	})
}
