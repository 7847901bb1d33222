package toolcall

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// callNote is what handleCall learns about a call that its reply does not
// carry (the server and its transport, also for a failed call); the
// observing wrapper reads it once the call has returned.
type callNote struct {
	srv      *config.Server
	personal bool // srv is one of the caller's personal connections
	// set and policy are the virtual server of the call and the decision
	// on it (virtual.go); empty without one.
	set, policy string
}

// server records the server a call resolved to.
func (n *callNote) server(t target) {
	n.srv, n.personal = t.srv, t.personal()
}

// Label values of a call that failed before it resolved to a server.
const (
	labelNone    = "none"
	labelUnknown = "unknown"
)

// observeCall wraps the mcpbus.tools.call handler: it counts the calls in
// flight, and at the end of every call counts it (calls, errors, latency)
// and writes its audit record. It is the one place calls are observed.
func (s *Service) observeCall(next func(context.Context, *upcall) (bus.ToolsCallReply, error)) bus.HandlerFunc[bus.Call, bus.ToolsCallReply] {
	return func(ctx context.Context, req bus.Call) (bus.ToolsCallReply, error) {
		s.metrics.InFlight.Inc()
		defer s.metrics.InFlight.Dec()
		start := time.Now()
		u := newUpcall(req)
		reply, err := next(ctx, u)
		s.recordCall(ctx, req, u.note, reply, err, time.Since(start))
		return reply, err
	}
}

// recordCall counts and audits one finished call. Labels stay bounded: the
// tool is the caller's name only once it resolved to a configured server
// (else "unknown"), and personal connections are "personal".
func (s *Service) recordCall(ctx context.Context, req bus.Call, note *callNote, reply bus.ToolsCallReply, err error, took time.Duration) {
	outcome := "ok"
	switch {
	case err != nil:
		outcome = string(bus.AsError(err).Code)
	case reply.IsError:
		outcome = "tool_error"
	}
	server, tool, transport := labelNone, labelUnknown, labelNone
	var srvName string
	if note.srv != nil {
		srvName = note.srv.Name
		personal := note.personal
		server, tool = metrics.Server(srvName, personal), metrics.ToolLabel(req.Tool, personal)
		transport = string(note.srv.Type)
	}
	m := s.metrics
	m.Calls.WithLabelValues(server, tool, transport, outcome).Inc()
	m.Duration.WithLabelValues(server, tool).Observe(took.Seconds())
	if err != nil {
		m.Errors.WithLabelValues(server, outcome).Inc()
	}
	if !s.deps.Audit.Enabled() {
		return
	}
	sc := bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}
	user, thread := sc.User(), sc.Thread()
	rec := audit.Record{
		Kind: audit.KindCall, User: user, Thread: thread, Tool: req.Tool, Server: srvName,
		Outcome: outcome, DurationMS: float64(took.Microseconds()) / 1000, ResultBytes: resultBytes(reply),
		VirtualServer: note.set, Policy: note.policy,
	}
	if note.srv != nil {
		rec.Transport = string(note.srv.Type)
	}
	if s.deps.Audit.CaptureArguments() {
		var secrets []string
		if req.Context != nil {
			for _, v := range req.Context.Secrets {
				secrets = append(secrets, v)
			}
		}
		if note.srv != nil {
			for _, v := range note.srv.Headers {
				secrets = append(secrets, v)
			}
			for _, v := range note.srv.Env {
				secrets = append(secrets, v)
			}
		}
		rec.Arguments, rec.ArgumentsTruncated = audit.Capture(req.Arguments, s.deps.Audit.Settings.MaxArgumentBytes, secrets...)
	}
	s.deps.Audit.Write(ctx, rec)
}

// resultBytes is the size of a reply's content and structured content.
func resultBytes(r bus.ToolsCallReply) int {
	n := len(r.StructuredContent)
	for _, c := range r.Content {
		n += len(c)
	}
	return n
}

// poolObs are a pool's metrics; nil fields count nothing.
type poolObs struct {
	sessions  prometheus.Gauge
	spawns    prometheus.Counter
	evictions prometheus.Counter
}

func (o poolObs) size(n int) {
	if o.sessions != nil {
		o.sessions.Set(float64(n))
	}
}

func (o poolObs) spawned() {
	if o.spawns != nil {
		o.spawns.Inc()
	}
}

func (o poolObs) evicted() {
	if o.evictions != nil {
		o.evictions.Inc()
	}
}

// instrument connects the pools to the service's metrics: sizes, spawns,
// evictions, and stdio processes that exited on their own.
func (s *Service) instrument() {
	if s.deps.Metrics == nil {
		s.deps.Metrics = metrics.NewToolcall(nil)
	}
	m := s.deps.Metrics
	s.metrics = m
	s.stdio.obs = poolObs{sessions: m.StdioSessions, spawns: m.Spawns.WithLabelValues("stdio"), evictions: m.Evictions.WithLabelValues("stdio")}
	s.remote.obs = poolObs{sessions: m.HTTPSessions, spawns: m.Spawns.WithLabelValues("http"), evictions: m.Evictions.WithLabelValues("http")}
	prev := s.stdio.onExit
	s.stdio.onExit = func(k sessionKey) {
		m.Crashes.Inc()
		if prev != nil {
			prev(k)
		}
	}
}
