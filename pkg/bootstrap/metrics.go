package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// MetricsRegistry is the process's Prometheus registry (one per process:
// `mcpbus dev` shares it between its services, so the api's /metrics shows
// them all), created on first use.
func (r *Runtime) MetricsRegistry() *prometheus.Registry {
	if r.Metrics == nil {
		r.Metrics = metrics.NewRegistry()
	}
	return r.Metrics
}

// natsStats reads a connection's reconnect count.
type natsStats struct{ nc *nats.Conn }

func (s natsStats) Reconnects() uint64 { return s.nc.Stats().Reconnects }

// registerNATSMetrics adds the connection's reconnect counter for service
// (ConnectNATS does, with the connection name less its "mcpbus-" prefix).
func (r *Runtime) registerNATSMetrics(service string) {
	if r.NC != nil {
		metrics.RegisterNATS(r.MetricsRegistry(), service, natsStats{r.NC})
	}
}

// ServeMetrics serves the process's registry at /metrics on addr (the
// --metrics-listen flag) until the returned stop is called; with an empty
// addr it does nothing. With r.Pprof (--pprof) it also serves Go's
// profiler at /debug/pprof/ there, and only there: no other listener ever
// mounts it. It returns once the address is bound, so a port in use fails
// the start.
func (r *Runtime) ServeMetrics(addr string) (stop func(), err error) {
	if addr == "" {
		if r.Pprof {
			return nil, errors.New("--pprof: needs --metrics-listen (the profiler is served only on the metrics listener)")
		}
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.MetricsRegistry(), promhttp.HandlerOpts{}))
	if r.Pprof {
		mountPprof(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.logger().Warn("metrics listener stopped", observability.Err(err))
		}
	}()
	r.logger().Info("serving metrics", "metrics_listen", ln.Addr().String(), "pprof", r.Pprof)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// mountPprof adds net/http/pprof's handlers under /debug/pprof/ (mounted by
// hand: importing the package for its side effect would put them on
// http.DefaultServeMux). /debug/pprof/cmdline is left out: the command
// line may hold a secret (--database-url with its password).
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// AuditWriter returns the writer of the audit log as config.yaml's audit
// block says (nil, writing nothing, when audit.enabled is false), creating
// the stream when missing (its metrics on the process registry). With
// audit.database it also writes to table (audittable.Of the open SQL
// store; NeedsAuditStore says when one is needed), otherwise table is
// unused and may be nil.
func (r *Runtime) AuditWriter(ctx context.Context, table audit.Table) (*audit.Writer, error) {
	o := audit.WriterOptions{Settings: r.Settings.Audit, Replicas: int(r.Settings.NATS.Replicas),
		Log: r.Log, Metrics: metrics.NewAudit(r.MetricsRegistry())}
	if NeedsAuditStore(r.Settings) {
		if table == nil {
			return nil, errors.New("audit.database: needs an open sqlite or postgres database")
		}
		o.DB = table
	}
	// Its stream is created here: retried like the other buckets and
	// streams a service sets up at start.
	return SetupJetStream(ctx, r.logger(), SetupDeadline, "audit", func(ctx context.Context) (*audit.Writer, error) {
		return audit.NewWriter(ctx, r.NC, r.Names, o)
	})
}

// NeedsAuditStore reports whether the audit writer writes to the database
// (audit.enabled and audit.database).
func NeedsAuditStore(s *config.Settings) bool {
	return s.Audit.Enabled && s.Audit.Database
}

func (r *Runtime) logger() *slog.Logger {
	if r.Log == nil {
		return observability.Discard()
	}
	return r.Log
}
