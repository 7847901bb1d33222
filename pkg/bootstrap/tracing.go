package bootstrap

import (
	"context"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// StartTracing installs the process's tracer provider when
// observability.tracing (or OTEL_TRACES_EXPORTER=otlp) turns tracing on,
// reporting service.name = service_name_prefix + name. Call it once per
// process; the returned function flushes the buffered spans (call it after
// the services have stopped). Off, it does nothing.
func (r *Runtime) StartTracing(ctx context.Context, name string) (tracing.Shutdown, error) {
	t := r.Settings.Observability.Tracing
	o := tracing.Options{Enabled: t.Enabled, Endpoint: t.Endpoint, Protocol: t.Protocol, SampleRatio: t.SampleRatio,
		Service: t.ServiceNamePrefix + name, Version: microsvc.Version, Log: r.Log}
	shutdown, err := tracing.Setup(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("observability.tracing: %w", err)
	}
	if o.On() {
		r.Log.Info("tracing on: exporting spans over OTLP", "service_name", o.Service)
	}
	return shutdown, nil
}

// StopTracing flushes the spans, logging (not returning) a failure: a
// collector that is down must not turn a clean stop into an error.
func (r *Runtime) StopTracing(shutdown tracing.Shutdown) {
	if err := shutdown(context.Background()); err != nil {
		r.Log.Warn("cannot flush spans to the collector", "error", err)
	}
}
