package bootstrap

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A NATS server restart moves the service's reconnect counter, and
// ServeMetrics serves the registry at /metrics on its own listener.
func TestNATSReconnectsAreCountedAndServed(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	s := config.DefaultSettings()
	s.NATS.URL = b.URL
	rt := &Runtime{Settings: &s, Names: b.Names, Log: observability.Discard()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.ConnectNATS(ctx, "mcpbus-test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	rt.registerNATSMetrics("toolcall")
	reconnects := func() float64 {
		return metricstest.Value(t, rt.MetricsRegistry(), "mcpbus_nats_reconnects_total", map[string]string{"service": "toolcall"})
	}
	if n := reconnects(); n != 0 {
		t.Fatalf("reconnects before a restart = %v", n)
	}
	b.Restart(t)
	testkit.Eventually(t, 20*time.Second, "the reconnect to be counted", func() bool { return reconnects() == 1 })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	stop, err := rt.ServeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", addr))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `mcpbus_nats_reconnects_total{service="toolcall"} 1`) {
		t.Errorf("/metrics:\n%s", body)
	}
	// The address is taken now: a second listener on it fails the start.
	if _, err := rt.ServeMetrics(addr); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("second ServeMetrics on %s: %v", addr, err)
	}
}
