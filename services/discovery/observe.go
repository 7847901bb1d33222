package discovery

import (
	"context"
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// observeDiscovery wraps a discovery with its metrics: duration by server
// and outcome, failures by server, and the tool count of a success. A
// personal connection (owner set) is labelled server="personal".
func observeDiscovery(m *metrics.Discovery, next discoverFunc) discoverFunc {
	return func(ctx context.Context, srv *config.Server, owner string) (discovered, error) {
		start := time.Now()
		d, err := next(ctx, srv, owner)
		server := metrics.Server(srv.Name, owner != "")
		outcome := "ok"
		if err != nil {
			outcome = "failed"
			m.Failures.WithLabelValues(server).Inc()
		} else if owner == "" {
			m.Tools.WithLabelValues(server).Set(float64(len(d.tools)))
		}
		m.Duration.WithLabelValues(server, outcome).Observe(time.Since(start).Seconds())
		return d, err
	}
}
