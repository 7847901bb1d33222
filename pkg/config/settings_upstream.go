package config

import (
	"cmp"
	"time"

	"github.com/mcpbus/mcpbus/pkg/egress"
)

// EgressSettings is the egress policy of the upstreams users control
// (personal http/sse connections and their OAuth token_url); see package
// egress. Deployment servers are not subject to it.
type EgressSettings struct {
	// Allow lists what personal connections may reach although it is
	// internal: CIDRs ("10.1.2.0/24"), IP addresses or exact host names
	// ("mcp.internal.example"). Default none.
	Allow []string `yaml:"allow"`
}

// Limits bound what upstream servers may send.
type Limits struct {
	// MaxUpstreamResponseBytes caps one upstream response: an HTTP body, an
	// SSE event or a stdio line. 0 (the default) means the bus's
	// max_payload (8 MiB with the embedded NATS, 1 MiB for a stock
	// nats-server): a bigger result could not travel on the bus anyway. A
	// server's own max_response_bytes replaces it; a personal connection's
	// can only lower it.
	MaxUpstreamResponseBytes int64 `yaml:"max_upstream_response_bytes"`
	// MaxCallsInFlightPerUser caps one user's tool calls in flight on a
	// toolcall replica; a call past it is refused with rate_limited. 0
	// means DefaultMaxCallsInFlightPerUser.
	MaxCallsInFlightPerUser int `yaml:"max_calls_in_flight_per_user"`
	// MaxCallsInFlightPerServer caps the tool calls in flight to one
	// upstream server on a toolcall replica, all users together. 0 means
	// DefaultMaxCallsInFlightPerServer.
	MaxCallsInFlightPerServer int `yaml:"max_calls_in_flight_per_server"`
}

// Defaults of the caps on calls in flight (per toolcall replica).
const (
	DefaultMaxCallsInFlightPerUser   = 64
	DefaultMaxCallsInFlightPerServer = 256
)

// Defaults of personal_connections' timeout maxima.
const (
	DefaultMaxSessionInitTimeoutSeconds = 60
	DefaultMaxToolCallTimeoutSeconds    = 300
)

// Upstream is what discovery and toolcall apply to upstream sessions: the
// egress allowlist and timeout maxima of personal connections and the
// response cap of every server.
type Upstream struct {
	Egress              EgressSettings
	Limits              Limits
	PersonalConnections PersonalConnections
	// BusMaxPayload is the bus's max_payload, the response cap when
	// neither limits nor the server set one (0: mcpclient's default).
	BusMaxPayload int64
}

// Upstream returns the settings' upstream part; busMaxPayload is the
// connected bus's max_payload.
func (s *Settings) Upstream(busMaxPayload int64) Upstream {
	return Upstream{Egress: s.Egress, Limits: s.Limits, PersonalConnections: s.PersonalConnections, BusMaxPayload: busMaxPayload}
}

// Personal returns srv, a personal connection, clamped to the operator's
// maxima (ClampPersonal with the deployment's response cap). Zero maxima
// count as the defaults.
func (u Upstream) Personal(srv *Server) *Server {
	pc := u.PersonalConnections
	pc.MaxSessionInitTimeoutSeconds = cmp.Or(pc.MaxSessionInitTimeoutSeconds, DefaultMaxSessionInitTimeoutSeconds)
	pc.MaxToolCallTimeoutSeconds = cmp.Or(pc.MaxToolCallTimeoutSeconds, DefaultMaxToolCallTimeoutSeconds)
	return pc.ClampPersonal(srv, u.Limits.ResponseLimit(nil, u.BusMaxPayload))
}

// ResponseLimit is the response cap of srv (see Limits.ResponseLimit).
func (u Upstream) ResponseLimit(srv *Server) int64 {
	return u.Limits.ResponseLimit(srv, u.BusMaxPayload)
}

// ClampPersonal returns a copy of srv, a personal connection, with its
// session_init_timeout and tool_call_timeout within the operator's maxima
// (a disabled one becomes the maximum) and its max_response_bytes no
// larger than deflt (the deployment's response cap; 0 = leave as is).
func (p PersonalConnections) ClampPersonal(srv *Server, deflt int64) *Server {
	out := *srv
	out.SessionInitTimeout = clampDuration(srv.SessionInitTimeout, time.Duration(p.MaxSessionInitTimeoutSeconds)*time.Second)
	out.ToolCallTimeout = clampDuration(srv.ToolCallTimeout, time.Duration(p.MaxToolCallTimeoutSeconds)*time.Second)
	if deflt > 0 && (out.MaxResponseBytes <= 0 || out.MaxResponseBytes > deflt) {
		out.MaxResponseBytes = deflt
	}
	return &out
}

// clampDuration is d within (0, limit]; 0 (disabled) becomes limit. A
// limit of 0 leaves d alone.
func clampDuration(d, limit time.Duration) time.Duration {
	if limit <= 0 {
		return d
	}
	if d <= 0 || d > limit {
		return limit
	}
	return d
}

// ResponseLimit is the cap of one response from srv: its own
// max_response_bytes, else the deployment's, else busMax (the bus's
// max_payload).
func (l Limits) ResponseLimit(srv *Server, busMax int64) int64 {
	if srv != nil && srv.MaxResponseBytes > 0 {
		return srv.MaxResponseBytes
	}
	if l.MaxUpstreamResponseBytes > 0 {
		return l.MaxUpstreamResponseBytes
	}
	return busMax
}

// upstreamLimits validates egress, limits and personal_connections.
func (v *settingsValidator) upstreamLimits(s *Settings) {
	if _, err := egress.New(s.Egress.Allow, nil); err != nil {
		v.errorf("egress.allow", "%v", err)
	}
	if n := s.Limits.MaxCallsInFlightPerUser; n < 0 {
		v.errorf("limits.max_calls_in_flight_per_user", "must be 0 (the default, %d) or more, got %d", DefaultMaxCallsInFlightPerUser, n)
	}
	if n := s.Limits.MaxCallsInFlightPerServer; n < 0 {
		v.errorf("limits.max_calls_in_flight_per_server", "must be 0 (the default, %d) or more, got %d", DefaultMaxCallsInFlightPerServer, n)
	}
	if n := s.Limits.MaxUpstreamResponseBytes; n != 0 && n < 1024 {
		v.errorf("limits.max_upstream_response_bytes", "must be 0 (the bus's max_payload) or at least 1024, got %d", n)
	}
	pc := &s.PersonalConnections
	if pc.MaxSessionInitTimeoutSeconds < 1 {
		v.errorf("personal_connections.max_session_init_timeout_seconds", "must be at least 1, got %d", pc.MaxSessionInitTimeoutSeconds)
	}
	if pc.MaxToolCallTimeoutSeconds < 1 {
		v.errorf("personal_connections.max_tool_call_timeout_seconds", "must be at least 1, got %d", pc.MaxToolCallTimeoutSeconds)
	}
}
