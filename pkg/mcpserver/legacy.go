package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// method answers one request's params with a result or a JSON-RPC error.
type method func(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error)

// Legacy is the legacy era's method table.
type Legacy struct {
	s       *Server
	methods map[string]method
}

func newLegacy(s *Server) *Legacy {
	l := &Legacy{s: s}
	l.methods = map[string]method{
		"initialize":       l.initialize,
		"ping":             func(context.Context, *Exchange, json.RawMessage) (any, *Error) { return struct{}{}, nil },
		"logging/setLevel": l.setLevel,
		"tools/list":       s.listTools,
		"tasks/get":        s.getTask,
		"tasks/result":     s.taskResult,
		"tasks/list":       s.listTasks,
		"tasks/cancel":     s.cancelTask,
	}
	s.addFedMethods(l.methods, func(m method, _ fedCaching) method { return m })
	l.methods["resources/subscribe"] = s.subscribeMethod(false)
	l.methods["resources/unsubscribe"] = s.subscribeMethod(true)
	return l
}

// Name implements Era.
func (l *Legacy) Name() string { return "legacy" }

// Dispatch implements Era. Before initialize only initialize and ping are
// answered.
func (l *Legacy) Dispatch(ctx context.Context, x *Exchange, m *Message) *Message {
	if !m.IsRequest() {
		// notifications/initialized, notifications/cancelled and responses
		// to our own requests.
		if m.Method == "notifications/cancelled" {
			l.s.cancelled(x, m.Params)
		}
		if m.IsResponse() {
			l.s.clientAnswered(x, m)
		}
		return nil
	}
	fn, ok := l.methods[m.Method]
	if !ok && m.Method != "tools/call" {
		return ErrorReply(m.ID, methodNotFound(m.Method))
	}
	if x.Session == nil && m.Method != "initialize" && m.Method != "ping" {
		return ErrorReply(m.ID, Errorf(CodeInvalidRequest, "send initialize first: %s is answered within an initialized session", m.Method))
	}
	if m.Method == "tools/call" {
		return serve(ctx, x, m, l.s.legacyCall)
	}
	return fn.run(ctx, x, m)
}

// run answers m with the method (which reads the params only).
func (fn method) run(ctx context.Context, x *Exchange, m *Message) *Message {
	return serve(ctx, x, m, func(ctx context.Context, x *Exchange, m *Message) (any, *Error) { return fn(ctx, x, m.Params) })
}

// serve answers m with fn, under the request's span (both eras, every
// method): the response to send.
func serve(ctx context.Context, x *Exchange, m *Message, fn func(context.Context, *Exchange, *Message) (any, *Error)) *Message {
	ctx, span := tracing.StartMCP(ctx, m.Method)
	result, rerr := fn(ctx, x, m)
	if rerr != nil {
		tracing.End(span, rerr, "jsonrpc_"+strconv.Itoa(rerr.Code))
		return ErrorReply(m.ID, rerr)
	}
	tracing.End(span, nil, "")
	return Reply(m.ID, result)
}

func methodNotFound(name string) *Error {
	return Errorf(CodeMethodNotFound, "method not found: %s", name)
}

type initializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	ClientInfo      json.RawMessage `json:"clientInfo"`
	Capabilities    json.RawMessage `json:"capabilities"`
}

// MaxSessionFieldBytes bounds each client-supplied value a session keeps
// (clientInfo, each kept capability), as bus.MaxCapabilityBytes bounds a
// capability on the bus: a session is mirrored in memory by every api
// replica.
const MaxSessionFieldBytes = bus.MaxCapabilityBytes

// checkSessionFields refuses an initialize whose clientInfo, or one of the
// capabilities a session keeps (bus.CapabilitiesOf), is larger than
// MaxSessionFieldBytes, naming the field (the protocol version kept is the
// negotiated one, the log level one of logLevels).
func checkSessionFields(p initializeParams) *Error {
	if len(p.ClientInfo) > MaxSessionFieldBytes {
		return Errorf(CodeInvalidParams, "initialize params: clientInfo is larger than %d bytes", MaxSessionFieldBytes)
	}
	if name := bus.OversizedCapability(p.Capabilities); name != "" {
		return Errorf(CodeInvalidParams, "initialize params: capabilities.%s is larger than %d bytes", name, MaxSessionFieldBytes)
	}
	return nil
}

type initializeResult struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Capabilities    map[string]any `json:"capabilities"`
	ServerInfo      serverInfo     `json:"serverInfo"`
	Instructions    string         `json:"instructions,omitempty"`
}

type serverInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// initialize negotiates the version and opens a session. Its instructions
// are the routing-hints section of the caller's catalog; a catalog that
// cannot be read leaves them out rather than refusing the session.
func (l *Legacy) initialize(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p initializeParams
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return nil, Errorf(CodeInvalidParams, "initialize params: %v", err)
	}
	if p.ProtocolVersion == "" {
		return nil, Errorf(CodeInvalidParams, "initialize params: protocolVersion is required")
	}
	if rerr := checkSessionFields(p); rerr != nil {
		return nil, rerr
	}
	now := l.s.deps.Now().UTC()
	x.Session = &Session{ID: NewSessionID(), UserID: x.UserID, VirtualServer: x.VirtualServer, ProtocolVersion: Negotiate(p.ProtocolVersion, LegacyVersions),
		ClientInfo: p.ClientInfo, ClientCapabilities: bus.CapabilitiesOf(p.Capabilities), CreatedAt: now, TouchedAt: now}
	if x.Session.ClientCapabilities == nil {
		x.Session.ClientCapabilities = &bus.ClientCapabilities{}
	}
	x.Created = true
	res := initializeResult{
		ProtocolVersion: x.Session.ProtocolVersion,
		Capabilities:    capabilities(),
		ServerInfo:      serverInfo{Name: l.s.cfg.Name, Version: l.s.cfg.Version},
	}
	if taskSessions(x) {
		res.Capabilities["tasks"] = tasksCapability
	}
	if cat, err := l.s.head(ctx, x); err != nil {
		l.s.log.Warn("catalog not read for initialize instructions", "user_id", x.UserID, observability.Err(err))
	} else {
		res.Instructions = cat.RoutingHints
	}
	return res, nil
}

// logLevels are the syslog levels MCP's logging uses.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLevel remembers the session's level (stored with the session, so any
// replica serving it knows): its tools/call get the upstream's log
// messages at that level and above (progress.go).
func (l *Legacy) setLevel(_ context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil || !slices.Contains(logLevels, p.Level) {
		return nil, Errorf(CodeInvalidParams, "logging/setLevel params: level must be one of %s", strings.Join(logLevels, ", "))
	}
	if x.Session.LogLevel != p.Level {
		x.Session.LogLevel, x.Changed = p.Level, true
	}
	return struct{}{}, nil
}

func orEmpty(params json.RawMessage) json.RawMessage {
	if len(params) == 0 || string(params) == "null" {
		return json.RawMessage("{}")
	}
	return params
}
