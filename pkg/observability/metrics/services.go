package metrics

import "github.com/prometheus/client_golang/prometheus"

// Common are the families every service has, labelled by service name.
type Common struct {
	// Generation is the cache generation the service last saw
	// (mcpbus_cache_generation{service}).
	Generation *prometheus.GaugeVec
}

// NewCommon registers the shared families on reg.
func NewCommon(reg prometheus.Registerer) *Common {
	reg = orNew(reg)
	return &Common{
		Generation: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpbus_cache_generation",
			Help: "The cluster-wide cache generation this service last saw.",
		}, []string{"service"})),
	}
}

// NATSStats is what RegisterNATS reads (a *nats.Conn's Stats).
type NATSStats interface {
	Reconnects() uint64
}

// NATSStatsFunc adapts a function to NATSStats.
type NATSStatsFunc func() uint64

// Reconnects implements NATSStats.
func (f NATSStatsFunc) Reconnects() uint64 { return f() }

// RegisterNATS adds mcpbus_nats_reconnects_total{service} for one
// service's connection, read from the connection's own statistics at
// scrape time. A second registration for the same service on one
// registry is ignored (the first connection keeps counting).
func RegisterNATS(reg prometheus.Registerer, service string, stats NATSStats) {
	c := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "mcpbus_nats_reconnects_total",
		Help:        "Times the service's NATS connection reconnected.",
		ConstLabels: prometheus.Labels{"service": service},
	}, func() float64 { return float64(stats.Reconnects()) })
	_ = register(orNew(reg), c)
}

// Toolcall are the toolcall service's metrics.
type Toolcall struct {
	// Calls counts finished tool calls by server, tool, transport and
	// outcome ("ok", "tool_error" for a result with isError, or the error
	// code).
	Calls *prometheus.CounterVec
	// Errors counts failed calls by server and error code.
	Errors *prometheus.CounterVec
	// Duration is the latency of calls by server and tool.
	Duration *prometheus.HistogramVec
	// StdioSessions and HTTPSessions are the pooled sessions now.
	StdioSessions prometheus.Gauge
	HTTPSessions  prometheus.Gauge
	// Spawns counts new upstream sessions by transport (a stdio spawn, an
	// HTTP/SSE initialize), Evictions sessions retired by the pool's
	// bounds, Crashes stdio processes that exited on their own.
	Spawns    *prometheus.CounterVec
	Evictions *prometheus.CounterVec
	Crashes   prometheus.Counter
	// RateLimited counts calls refused by a cap on calls in flight, by
	// limit ("user" or "server").
	RateLimited *prometheus.CounterVec
	// VirtualDecisions counts calls through a virtual server by set and
	// policy decision ("allowed", "forbidden", "rate_limited").
	VirtualDecisions *prometheus.CounterVec
	// InFlight is the number of tool calls this replica is running (the
	// autoscaling signal of the Helm chart: calls in flight per replica).
	InFlight prometheus.Gauge
	// Generation is mcpbus_cache_generation{service="toolcall"}.
	Generation prometheus.Gauge
}

// NewToolcall registers the toolcall metrics on reg.
func NewToolcall(reg prometheus.Registerer) *Toolcall {
	reg = orNew(reg)
	return &Toolcall{
		Calls: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_calls_total",
			Help: "Tool calls finished by the toolcall service, by server, tool, transport and outcome (ok, tool_error or the error code).",
		}, []string{"server", "tool", "transport", "outcome"})),
		Errors: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_errors_total",
			Help: "Tool calls that failed, by server and error code.",
		}, []string{"server", "code"})),
		Duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpbus_toolcall_call_duration_seconds",
			Help:    "Latency of tool calls in the toolcall service, by server and tool.",
			Buckets: durationBuckets,
		}, []string{"server", "tool"})),
		StdioSessions: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpbus_toolcall_stdio_sessions",
			Help: "stdio sessions (server processes) pooled by this toolcall replica.",
		})),
		HTTPSessions: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpbus_toolcall_http_sessions",
			Help: "HTTP/SSE upstream sessions pooled by this toolcall replica.",
		})),
		Spawns: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_session_spawns_total",
			Help: "Upstream sessions opened (stdio processes spawned, HTTP/SSE sessions initialized), by transport.",
		}, []string{"transport"})),
		Evictions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_session_evictions_total",
			Help: "Sessions retired because the pool or a user's share of it was full, by transport.",
		}, []string{"transport"})),
		Crashes: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_stdio_crashes_total",
			Help: "stdio server processes that exited on their own while pooled.",
		})),
		RateLimited: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_rate_limited_total",
			Help: "Tool calls refused because a cap on calls in flight was reached, by limit (user or server).",
		}, []string{"limit"})),
		VirtualDecisions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_toolcall_virtual_server_decisions_total",
			Help: "Tool calls through a virtual server, by virtual server and policy decision (allowed, forbidden, rate_limited).",
		}, []string{"virtual_server", "decision"})),
		InFlight: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpbus_toolcall_calls_in_flight",
			Help: "Tool calls this toolcall replica is running now.",
		})),
		Generation: NewCommon(reg).Generation.WithLabelValues("toolcall"),
	}
}

// Discovery are the discovery service's metrics.
type Discovery struct {
	// Duration is the time of one server's discovery (connect, initialize,
	// tools/list), by server and outcome (ok, failed).
	Duration *prometheus.HistogramVec
	// Failures counts failed discoveries by server.
	Failures *prometheus.CounterVec
	// Tools is the number of tools each server's last good discovery found.
	Tools *prometheus.GaugeVec
	// Generation is mcpbus_cache_generation{service="discovery"}.
	Generation prometheus.Gauge
	// Pins is the number of tools per pin state (approved, pending,
	// blocked, rejected) in each pinned server's last discovery.
	Pins *prometheus.GaugeVec
}

// NewDiscovery registers the discovery metrics on reg.
func NewDiscovery(reg prometheus.Registerer) *Discovery {
	reg = orNew(reg)
	return &Discovery{
		Duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpbus_discovery_duration_seconds",
			Help:    "Time of one server's discovery (connect, initialize, tools/list), by server and outcome.",
			Buckets: durationBuckets,
		}, []string{"server", "outcome"})),
		Failures: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_discovery_failures_total",
			Help: "Failed discoveries, by server.",
		}, []string{"server"})),
		Tools: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpbus_discovery_tools",
			Help: "Tools found by each server's last successful discovery.",
		}, []string{"server"})),
		Generation: NewCommon(reg).Generation.WithLabelValues("discovery"),
		Pins: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpbus_discovery_tool_pins",
			Help: "Tools per pin state (approved, pending, blocked, rejected) in each pinned server's last discovery; pending and blocked ones are not served as listed.",
		}, []string{"server", "state"})),
	}
}

// Tokens are the tokens service's metrics.
type Tokens struct {
	// Fetches counts token requests answered by the service, by server,
	// grant and outcome (cached, fetched, or the error code).
	Fetches *prometheus.CounterVec
	// Refreshes counts calls to token endpoints, by server, grant and
	// outcome (ok, failed, invalid_grant).
	Refreshes *prometheus.CounterVec
	// LeaseWaits counts refreshes that waited for another replica's lease.
	LeaseWaits *prometheus.CounterVec
	// InvalidGrant counts invalid_grant answers of token endpoints.
	InvalidGrant *prometheus.CounterVec
}

// NewTokens registers the tokens metrics on reg.
func NewTokens(reg prometheus.Registerer) *Tokens {
	reg = orNew(reg)
	return &Tokens{
		Fetches: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_tokens_fetches_total",
			Help: "Access token requests answered by the tokens service, by server, grant and outcome (ok or the error code).",
		}, []string{"server", "grant", "outcome"})),
		Refreshes: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_tokens_refreshes_total",
			Help: "Requests to OAuth token endpoints, by server, grant and outcome (ok, failed, invalid_grant).",
		}, []string{"server", "grant", "outcome"})),
		LeaseWaits: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_tokens_lease_waits_total",
			Help: "Refreshes that waited for another replica's refresh lease, by server.",
		}, []string{"server"})),
		InvalidGrant: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_tokens_invalid_grant_total",
			Help: "invalid_grant answers from token endpoints (a refresh chain that needs a new seed), by server.",
		}, []string{"server"})),
	}
}

// Taskpoller are the taskpoller service's metrics.
type Taskpoller struct {
	// Transitions counts tasks reaching a status (a poll's or cancel's
	// result), by status.
	Transitions *prometheus.CounterVec
	// Polls counts status polls by outcome (ok, tool_error, invalid, or
	// the error code of a failed call).
	Polls *prometheus.CounterVec
	// PollErrors counts failed status calls by error code.
	PollErrors *prometheus.CounterVec
	// PollLag is the time from a task's next_poll_at to its poll.
	PollLag prometheus.Histogram
	// OutboxBacklog is the number of task rows with an undelivered
	// notification (a count query, refreshed at most once per poll
	// interval).
	OutboxBacklog prometheus.Gauge
	// Tasks is the number of mcp_tasks rows in each status (a count query,
	// refreshed with OutboxBacklog), by status.
	Tasks *prometheus.GaugeVec
	// Published counts task notifications acknowledged by JetStream,
	// PublishFailures those that failed, DeadLetters those given up.
	Published       prometheus.Counter
	PublishFailures prometheus.Counter
	DeadLetters     prometheus.Counter
}

// NewTaskpoller registers the taskpoller metrics on reg.
func NewTaskpoller(reg prometheus.Registerer) *Taskpoller {
	reg = orNew(reg)
	return &Taskpoller{
		Transitions: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_tasks_status_total",
			Help: "Durable task results stored by the pollers, by the task's status afterwards.",
		}, []string{"status"})),
		Polls: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_taskpoller_polls_total",
			Help: "Status polls of durable tasks, by outcome (ok, tool_error, invalid or the error code).",
		}, []string{"outcome"})),
		PollErrors: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_taskpoller_poll_errors_total",
			Help: "Status polls whose call failed, by error code.",
		}, []string{"code"})),
		PollLag: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mcpbus_taskpoller_poll_lag_seconds",
			Help:    "Time from a task's next_poll_at to the start of its status call.",
			Buckets: lagBuckets,
		})),
		OutboxBacklog: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpbus_taskpoller_outbox_backlog",
			Help: "Durable tasks with an undelivered notification (pending, claimed or retry), as counted by this replica.",
		})),
		Tasks: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpbus_tasks",
			Help: "Durable tasks (mcp_tasks rows) in each status, as counted by this replica.",
		}, []string{"status"})),
		Published: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpbus_taskpoller_notifications_published_total",
			Help: "Task notifications acknowledged by JetStream.",
		})),
		PublishFailures: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpbus_taskpoller_notification_failures_total",
			Help: "Task notification publishes that failed (retried with backoff).",
		})),
		DeadLetters: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpbus_taskpoller_dead_letters_total",
			Help: "Task notifications given up after their attempts ran out.",
		})),
	}
}

// API are the api service's metrics.
type API struct {
	Requests *prometheus.CounterVec
	Latency  *prometheus.HistogramVec
	// VirtualRefused counts requests refused by a key's
	// api.keys[].virtual_servers, by the virtual server asked for ("" for
	// the whole catalog, "unknown" for a name no set has).
	VirtualRefused *prometheus.CounterVec
}

// NewAPI registers the api metrics on reg.
func NewAPI(reg prometheus.Registerer) *API {
	reg = orNew(reg)
	return &API{
		Requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_api_requests_total",
			Help: "HTTP requests served by the api service, by method, route template and status.",
		}, []string{"method", "route", "status"})),
		Latency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpbus_api_request_duration_seconds",
			Help:    "Latency of HTTP requests served by the api service, by method and route template.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"})),
		VirtualRefused: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_api_virtual_server_refusals_total",
			Help: "Requests refused because the caller's API key is bound to other virtual servers, by the virtual server asked for.",
		}, []string{"virtual_server"})),
	}
}

// Audit are the audit log's metrics (in toolcall and api).
type Audit struct {
	// Records counts audit records written, by kind (call, config);
	// Failures those that could not be written.
	Records  *prometheus.CounterVec
	Failures *prometheus.CounterVec
}

// NewAudit registers the audit metrics on reg.
func NewAudit(reg prometheus.Registerer) *Audit {
	reg = orNew(reg)
	return &Audit{
		Records: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_audit_records_total",
			Help: "Audit records written to the audit stream, by kind (call, config).",
		}, []string{"kind"})),
		Failures: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpbus_audit_failures_total",
			Help: "Audit records that could not be written, by kind.",
		}, []string{"kind"})),
	}
}

// All registers every service's metrics on reg (dev mode's one registry
// has them all; the dashboard test checks against it).
func All(reg prometheus.Registerer) {
	NewCommon(reg)
	NewToolcall(reg)
	NewDiscovery(reg)
	NewTokens(reg)
	NewTaskpoller(reg)
	NewAPI(reg)
	NewAudit(reg)
	RegisterNATS(reg, "all", NATSStatsFunc(func() uint64 { return 0 }))
}
