package api

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	obsmetrics "github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// unmatchedRoute labels requests that matched no route, so unknown paths
// cannot grow the label set.
const unmatchedRoute = "unmatched"

// metrics holds the api's Prometheus collectors and the registry /metrics
// serves: Deps.Metrics (the process's, which in dev mode holds every
// service's metrics), else one of its own per Service, so tests can run
// several.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// virtualRefused counts key-policy refusals (virtual.go).
	virtualRefused *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	if reg == nil {
		reg = obsmetrics.NewRegistry()
	}
	m := obsmetrics.NewAPI(reg)
	return &metrics{reg: reg, requests: m.Requests, latency: m.Latency, virtualRefused: m.VirtualRefused}
}

// observe is the outermost middleware: it turns a handler error into its
// response (so the status is known), counts the request, records its
// latency and logs one line with the route template (never the raw path,
// query or body).
func (s *Service) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" || isCatchAll(route) {
			route = unmatchedRoute
		}
		status := c.Response().Status
		elapsed := time.Since(start)
		method := c.Request().Method
		s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
		s.metrics.latency.WithLabelValues(method, route).Observe(elapsed.Seconds())
		level := slog.LevelInfo
		if route == "/healthz" || route == "/readyz" || route == "/metrics" {
			level = slog.LevelDebug // probes and scrapes
		}
		s.log.Log(c.Request().Context(), level, "request served", "method", method, "route", route, "status", status,
			"duration_ms", elapsed.Milliseconds(), "request_id", c.Request().Header.Get(bus.HeaderRequestID))
		return nil
	}
}

// isCatchAll reports the catch-all routes echo registers for 404s (the
// /api group's middleware needs them); no real route looks like these.
func isCatchAll(route string) bool {
	return route == "/*" || route == "/api" || route == "/api/*"
}

// metricsHandler serves the registry in the Prometheus text format.
func (s *Service) metricsHandler() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
}
