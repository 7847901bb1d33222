package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// The modern era (2026-07-28): no initialize and no session; every request
// carries its protocol version, client info and client capabilities in
// params._meta (basic/index, "Per-request protocol fields"); server/discover
// says what the server is; subscriptions/listen is the only long-lived
// stream. The operations (listTools, callTool) are the legacy era's.

// Version20260728 is the modern era's protocol version.
const Version20260728 = "2026-07-28"

// ModernVersions are the versions Modern speaks, newest first.
var ModernVersions = []string{Version20260728}

// SupportedVersions is what server/discover and the unsupported-version
// error list: every version mcpbus speaks, modern first.
var SupportedVersions = append(slices.Clone(ModernVersions), LegacyVersions...)

// IsModernVersion reports a modern version this server speaks.
func IsModernVersion(v string) bool { return slices.Contains(ModernVersions, v) }

// Reserved _meta keys of the modern era.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Error codes the MCP specification defines (-32020 to -32099, 2026-07-28).
const (
	CodeHeaderMismatch                  = -32020
	CodeMissingRequiredClientCapability = -32021
	CodeUnsupportedProtocolVersion      = -32022
)

// Methods of the modern era that transports treat specially.
const (
	MethodDiscover = "server/discover"
	MethodListen   = "subscriptions/listen"
)

// requestMeta is what mcpbus reads of params._meta: the modern era's
// per-request protocol fields, a progress token and a tool digest.
type requestMeta struct {
	ProtocolVersion    *string         `json:"io.modelcontextprotocol/protocolVersion"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	LogLevel           string          `json:"io.modelcontextprotocol/logLevel"`
	ProgressToken      json.RawMessage `json:"progressToken"`
	Digest             string          `json:"mcpbus/digest"`
}

// metaOf is params._meta's protocol fields (zero when params has none or
// is not an object).
func metaOf(params json.RawMessage) requestMeta {
	var p struct {
		Meta requestMeta `json:"_meta"`
	}
	_ = json.Unmarshal(orEmpty(params), &p)
	return p.Meta
}

// MetaVersion is the protocol version a request names in its _meta, and
// whether it names one at all: a request that does is a modern one
// (versioning, "A dual-era server selects its behavior from how the
// client opens").
func MetaVersion(m *Message) (string, bool) {
	if m == nil || len(m.Params) == 0 || !bytes.Contains(m.Params, []byte(MetaProtocolVersion)) {
		return "", false
	}
	p, _ := m.paramsOf()
	meta := p.Meta
	if meta.ProtocolVersion == nil {
		return "", false
	}
	return *meta.ProtocolVersion, true
}

// IsModern reports whether m belongs to the modern era: it carries a
// protocol version in _meta, it is server/discover or subscriptions/listen,
// or the transport's header names a modern version. initialize opens a
// legacy session, unless it is sent as a 2026-07-28 request (its _meta or
// the header names a modern version): then it is modern, and that
// revision, which has no initialize, answers method not found (HTTP 404).
// Everything else is legacy.
func IsModern(m *Message, headerVersion string) bool {
	v, inMeta := MetaVersion(m)
	if m.Method == "initialize" {
		return (inMeta && IsModernVersion(v)) || IsModernVersion(headerVersion)
	}
	return inMeta || m.Method == MethodDiscover || m.Method == MethodListen || IsModernVersion(headerVersion)
}

// Modern is the modern era's method table.
type Modern struct {
	s       *Server
	methods map[string]method
	// serverInfoJSON is _meta's serverInfo value, encoded once.
	serverInfoJSON json.RawMessage
	// serverInfoMeta is the _meta of a result without one of its own
	// ({"io.modelcontextprotocol/serverInfo":...}), encoded once.
	serverInfoMeta json.RawMessage
}

func newModern(s *Server) *Modern {
	m := &Modern{s: s, serverInfoJSON: mustJSON(serverInfo{Name: s.cfg.Name, Version: s.cfg.Version})}
	m.serverInfoMeta = mustJSON(map[string]json.RawMessage{MetaServerInfo: m.serverInfoJSON})
	m.methods = map[string]method{
		MethodDiscover: m.discover,
		"tools/list":   m.listTools,
	}
	m.addTaskMethods()
	s.addFedMethods(m.methods, func(fn method, c fedCaching) method {
		ttl := time.Duration(-1)
		switch c {
		case cacheList:
			ttl = s.cfg.CatalogTTL
		case cacheRead:
			ttl = 0
		}
		return func(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
			res, rerr := fn(ctx, x, params)
			if rerr != nil {
				return nil, rerr
			}
			return m.withResult(res, ttl)
		}
	})
	return m
}

// Modern is the era of per-request metadata (2026-07-28).
func (s *Server) Modern() *Modern { return s.modern }

// Name implements Era.
func (m *Modern) Name() string { return "modern" }

// Check validates a modern request's protocol fields: a missing version or
// clientCapabilities is invalid params, a version this server does not
// speak the unsupported-version error listing the supported ones.
func (m *Modern) Check(msg *Message) *Error {
	p, _ := msg.paramsOf()
	meta := p.Meta
	if meta.ProtocolVersion == nil || *meta.ProtocolVersion == "" {
		return Errorf(CodeInvalidParams, "%s: params._meta[%q] is required in protocol %s", msg.Method, MetaProtocolVersion, Version20260728)
	}
	if v := *meta.ProtocolVersion; !IsModernVersion(v) {
		return UnsupportedVersion(v)
	}
	if len(meta.ClientCapabilities) == 0 || meta.ClientCapabilities[0] != '{' {
		return Errorf(CodeInvalidParams, "%s: params._meta[%q] is required (an object; {} for none)", msg.Method, MetaClientCapabilities)
	}
	if meta.LogLevel != "" && !slices.Contains(logLevels, meta.LogLevel) {
		return Errorf(CodeInvalidParams, "%s: params._meta[%q] must be one of %s", msg.Method, MetaLogLevel, strings.Join(logLevels, ", "))
	}
	return nil
}

// Headers are the HTTP headers of a modern request that mirror its body
// (streamable HTTP, "Server Validation"): MCP-Protocol-Version, Mcp-Method,
// every Mcp-Name and the Mcp-Param-* ones (by lower-cased name after the
// prefix).
type Headers struct {
	Version, Method string
	Name            []string
	Params          map[string][]string
}

// Admit is every check a modern HTTP request passes before it runs, on
// the params decoded once: the mirrored headers against the body
// (CheckHeaders), the protocol fields (Check), and a tools/call's
// Mcp-Param-* headers against the tool's annotations (CheckParamHeaders).
// nil: the transport dispatches it (Dispatch), or holds its listen stream
// (Listen).
func (m *Modern) Admit(ctx context.Context, x *Exchange, msg *Message, h Headers) *Error {
	if rerr := CheckHeaders(msg, h.Version, h.Method, h.Name); rerr != nil {
		return rerr
	}
	if rerr := m.Check(msg); rerr != nil {
		return rerr
	}
	return m.CheckParamHeaders(ctx, x, msg, h.Params)
}

// UnsupportedVersion is the error for a request in version v, which this
// server does not speak (modern or legacy: an initialize-era version in
// _meta is not a modern request this server can serve).
func UnsupportedVersion(v string) *Error {
	return &Error{Code: CodeUnsupportedProtocolVersion,
		Message: "Unsupported protocol version " + strconv.Quote(v) + ": this server speaks " + strings.Join(SupportedVersions, ", ") + " (" + Version20260728 + " per request, the others through initialize)",
		Data:    mustJSON(map[string]any{"supported": SupportedVersions, "requested": v})}
}

// MissingCapability is the error for a request that needs client
// capabilities the request's _meta did not declare (required, e.g.
// {"elicitation":{}}); why names what needs them (a tool, its server).
func MissingCapability(required map[string]any, why string) *Error {
	return &Error{Code: CodeMissingRequiredClientCapability, Message: "Missing required client capability: " + why,
		Data: mustJSON(map[string]any{"requiredCapabilities": required})}
}

// ClientCapabilities is the client capabilities a modern request declares
// in _meta (nil when it declares none: a legacy request's are its
// session's initialize).
func ClientCapabilities(params json.RawMessage) json.RawMessage {
	return metaOf(params).ClientCapabilities
}

// Dispatch implements Era. notifications/cancelled (stdio) cancels the
// call it names; any other notification is ignored.
func (m *Modern) Dispatch(ctx context.Context, x *Exchange, msg *Message) *Message {
	if !msg.IsRequest() {
		if msg.Method == "notifications/cancelled" {
			m.s.cancelled(x, msg.Params)
		}
		return nil
	}
	if rerr := m.Check(msg); rerr != nil {
		return ErrorReply(msg.ID, rerr)
	}
	if msg.Method == "tools/call" {
		return serve(ctx, x, msg, m.callTool)
	}
	fn, ok := m.methods[msg.Method]
	if !ok {
		if msg.Method == MethodListen {
			return ErrorReply(msg.ID, Errorf(CodeInternalError, "subscriptions/listen is answered by the transport"))
		}
		if msg.Method == "initialize" {
			return ErrorReply(msg.ID, Errorf(CodeMethodNotFound, "method not found: initialize is not part of protocol %s (send server/discover; a legacy client sends initialize without a %s version)", Version20260728, Version20260728))
		}
		if msg.Method == "ping" || msg.Method == "logging/setLevel" {
			return ErrorReply(msg.ID, Errorf(CodeMethodNotFound, "method not found: %s is not part of protocol %s", msg.Method, Version20260728))
		}
		return ErrorReply(msg.ID, methodNotFound(msg.Method))
	}
	return fn.run(ctx, x, msg)
}

// capabilities are the server's capabilities in both eras.
func capabilities() map[string]any {
	return fedCapabilities(map[string]any{"tools": map[string]any{"listChanged": true}, "logging": map[string]any{}})
}

// resultMeta is the _meta every modern result carries.
func (m *Modern) resultMeta() map[string]any {
	return map[string]any{MetaServerInfo: serverInfo{Name: m.s.cfg.Name, Version: m.s.cfg.Version}}
}

// withResult adds resultType, the server info and, when ttl >= 0, the
// caching hints (cacheScope private: a catalog is the caller's own) to a
// result object.
func (m *Modern) withResult(result any, ttl time.Duration) (json.RawMessage, *Error) {
	if cr, ok := result.(callResult); ok {
		return m.callResultJSON(cr), nil
	}
	if rr, ok := result.(readResult); ok && ttl >= 0 {
		// The contents are not decoded again.
		return rr.appendJSON(nil, `,"resultType":"complete","_meta":{"`+MetaServerInfo+`":`+string(m.serverInfoJSON)+`}`,
			`,"ttlMs":`+strconv.FormatInt(ttl.Milliseconds(), 10)+`,"cacheScope":"private"`), nil
	}
	if ct, ok := result.(createdTask); ok {
		result = ct.result()
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, Errorf(CodeInternalError, "cannot encode the result")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, Errorf(CodeInternalError, "cannot encode the result")
	}
	if _, ok := fields["resultType"]; !ok {
		// A CreateTaskResult says "task".
		fields["resultType"] = json.RawMessage(`"complete"`)
	}
	meta := map[string]json.RawMessage{}
	if old, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(old, &meta)
	}
	for k, v := range m.resultMeta() {
		meta[k] = mustJSON(v)
	}
	fields["_meta"] = mustJSON(meta)
	if ttl >= 0 {
		fields["ttlMs"] = json.RawMessage(strconv.FormatInt(ttl.Milliseconds(), 10))
		fields["cacheScope"] = json.RawMessage(`"private"`)
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, Errorf(CodeInternalError, "cannot encode the result")
	}
	return out, nil
}

// callResultJSON is a tools/call result with resultType and the server
// info merged into its _meta, assembled from its raw parts (the hot path:
// content and structuredContent are not decoded again).
func (m *Modern) callResultJSON(cr callResult) json.RawMessage {
	if len(cr.Meta) == 0 {
		cr.Meta = m.serverInfoMeta // the usual case, without a map per call
	} else {
		meta := map[string]json.RawMessage{}
		_ = json.Unmarshal(cr.Meta, &meta)
		meta[MetaServerInfo] = m.serverInfoJSON
		cr.Meta = mustJSON(meta)
	}
	if ir := cr.InputRequired; ir != nil {
		// An upstream's multi-round-trip answer (bridge.go), relayed.
		return mustJSON(struct {
			ResultType    string          `json:"resultType"`
			InputRequests json.RawMessage `json:"inputRequests,omitempty"`
			RequestState  string          `json:"requestState,omitempty"`
			Meta          json.RawMessage `json:"_meta"`
		}{"input_required", ir.InputRequests, ir.RequestState, cr.Meta})
	}
	b := cr.appendJSON(make([]byte, 0, 256))
	b = append(b[:len(b)-1], `,"resultType":"complete"}`...)
	return b
}

// discover is server/discover: the versions mcpbus speaks, its identity,
// capabilities and the caller's routing hints as instructions (as
// initialize has them). The instructions are the caller's, so the result
// is private to the authorization context.
func (m *Modern) discover(ctx context.Context, x *Exchange, _ json.RawMessage) (any, *Error) {
	caps := capabilities()
	caps["extensions"] = map[string]any{TasksExtension: map[string]any{}}
	res := map[string]any{"supportedVersions": SupportedVersions, "capabilities": caps}
	if cat, err := m.s.head(ctx, x); err != nil {
		m.s.log.Warn("catalog not read for server/discover instructions", "user_id", x.UserID, observability.Err(err))
	} else if cat.RoutingHints != "" {
		res["instructions"] = cat.RoutingHints
	}
	return m.withResult(res, m.s.cfg.CatalogTTL)
}

// listTools is tools/list with the caching hints (and the tools' task
// support for a request declaring the tasks extension).
func (m *Modern) listTools(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	if declaresTasks(params) {
		cx := *x
		cx.tasksExtension = true
		x = &cx
	}
	res, rerr := m.s.listTools(ctx, x, params)
	if rerr != nil {
		return nil, rerr
	}
	return m.withResult(res, m.s.cfg.CatalogTTL)
}

// callTool is the modern era's tools/call (2026-07-28: /mcp per request,
// stdio). A call without a session is named (for
// cancellation) within x.Scope, a fresh one per request when the transport
// sets none; when ctx ends before the reply (over HTTP, the client closed
// the response stream: the modern era's cancellation) the call is
// cancelled on the toolcall replica running it.
func (m *Modern) callTool(ctx context.Context, x *Exchange, msg *Message) (any, *Error) {
	if x.Session == nil && x.Scope == "" {
		cx := *x
		cx.Scope = NewSessionID()
		x = &cx
	}
	var (
		res  any
		rerr *Error
	)
	if p, err := msg.paramsOf(); err != nil {
		rerr = Errorf(CodeInvalidParams, "tools/call params: %v", err)
	} else {
		task := extensionTask(msg.Params)
		res, rerr = m.s.callDecoded(ctx, x, msg.ID, p, task, task == nil)
	}
	if ctx.Err() != nil {
		m.s.cancelCall(x, msg.ID, "the client closed the request's stream")
		return nil, &Error{Code: CodeRequestCancelled, Message: "tools/call: cancelled"}
	}
	if rerr != nil {
		return nil, rerr
	}
	return m.withResult(res, -1)
}

// ListenFilter is the notifications filter of subscriptions/listen; mcpbus
// honours toolsListChanged, promptsListChanged and resourcesListChanged
// (the lists it declares listChanged for) and the tasks extension's
// taskIds (tasksext.go).
type ListenFilter struct {
	ToolsListChanged     bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged   bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged bool     `json:"resourcesListChanged,omitempty"`
	TaskIDs              []string `json:"taskIds,omitempty"`
	// ResourceSubscriptions are visible URIs whose
	// notifications/resources/updated the listen asks for (the
	// transport subscribes them: subscriptions.go).
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// Wants reports that the listen asked for list's list_changed (bus.ListTools,
// bus.ListPrompts, bus.ListResources).
func (f ListenFilter) Wants(list string) bool {
	switch list {
	case bus.ListTools:
		return f.ToolsListChanged
	case bus.ListPrompts:
		return f.PromptsListChanged
	case bus.ListResources:
		return f.ResourcesListChanged
	}
	return false
}

// WantsLists reports that the listen asked for some list_changed.
func (f ListenFilter) WantsLists() bool {
	return f.ToolsListChanged || f.PromptsListChanged || f.ResourcesListChanged
}

// Listen checks a subscriptions/listen request and returns the
// acknowledgement to send first and the filter agreed; a refusal is the
// error response to send instead.
func (m *Modern) Listen(msg *Message) (ack *Message, filter ListenFilter, refusal *Message) {
	rerr := m.Check(msg)
	if rerr != nil {
		return nil, filter, ErrorReply(msg.ID, rerr)
	}
	var p struct {
		Notifications *struct {
			ToolsListChanged      bool     `json:"toolsListChanged"`
			PromptsListChanged    bool     `json:"promptsListChanged"`
			ResourcesListChanged  bool     `json:"resourcesListChanged"`
			TaskIDs               []string `json:"taskIds"`
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(orEmpty(msg.Params), &p); err != nil || p.Notifications == nil {
		return nil, filter, ErrorReply(msg.ID, Errorf(CodeInvalidParams, "subscriptions/listen params: notifications (the filter) is required"))
	}
	filter.ToolsListChanged = p.Notifications.ToolsListChanged
	filter.PromptsListChanged = p.Notifications.PromptsListChanged
	filter.ResourcesListChanged = p.Notifications.ResourcesListChanged
	if filter.TaskIDs, rerr = listenTaskIDs(msg.Params, p.Notifications.TaskIDs); rerr != nil {
		return nil, ListenFilter{}, ErrorReply(msg.ID, rerr)
	}
	if len(p.Notifications.ResourceSubscriptions) > MaxSessionSubscriptions {
		return nil, ListenFilter{}, ErrorReply(msg.ID, Errorf(CodeInvalidParams, "subscriptions/listen params: notifications.resourceSubscriptions holds at most %d URIs", MaxSessionSubscriptions))
	}
	filter.ResourceSubscriptions = p.Notifications.ResourceSubscriptions
	return ListenAck(msg.ID, filter), filter, nil
}

// ListChanged is notifications/tools/list_changed on the subscription
// opened by the request with id.
func ListChanged(subscription json.RawMessage) *Message {
	return ListChangedOn(bus.ListTools, subscription)
}

// ListChangedOn is list's notifications/<list>/list_changed on the
// subscription opened by the request with id.
func ListChangedOn(list string, subscription json.RawMessage) *Message {
	return Notification(listMethods[list], map[string]any{"_meta": map[string]json.RawMessage{MetaSubscriptionID: subscription}})
}

// ListenClosed is the response that ends the subscription opened by the
// request with id gracefully (the server shuts down).
func (m *Modern) ListenClosed(id json.RawMessage) *Message {
	meta := m.resultMeta()
	meta[MetaSubscriptionID] = id
	return Reply(id, map[string]any{"resultType": "complete", "_meta": meta})
}

// cancelCall publishes mcpbus.tools.cancel for the call with JSON-RPC id.
func (s *Server) cancelCall(x *Exchange, id json.RawMessage, reason string) {
	callID := callID(x, id)
	if callID == "" {
		return
	}
	body, _ := json.Marshal(bus.ToolsCancelRequest{CallID: callID, UserID: x.UserID, Reason: reason})
	if err := s.deps.NC.Publish(s.deps.Names.ToolsCancel(), body); err != nil {
		s.log.Warn("tool call cancellation not published", observability.Err(err))
	}
}

// HeaderValue decodes a Mcp-Name (or Mcp-Param-*) header value: the
// Base64 sentinel form =?base64?...?= is decoded; a value with characters
// a header may not carry is invalid.
func HeaderValue(v string) (string, bool) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return "", false
		}
	}
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") && len(v) >= len("=?base64??=") {
		raw, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-len("?=")])
		if err != nil || !utf8.Valid(raw) {
			return "", false
		}
		return string(raw), true
	}
	return v, true
}

// CheckHeaders validates a modern HTTP request's mirrored headers against
// its body (streamable HTTP, "Server Validation"): MCP-Protocol-Version
// must be present and equal _meta's version, Mcp-Method present and equal
// the method, Mcp-Name present and equal params.name for tools/call. Any
// failure is a HeaderMismatch error, except a body without the _meta
// version at all, which is invalid params (a malformed request).
func CheckHeaders(msg *Message, version, method string, name []string) *Error {
	metaVersion, hasMeta := MetaVersion(msg)
	switch {
	case version == "":
		return Errorf(CodeHeaderMismatch, "Header mismatch: the MCP-Protocol-Version header is required")
	case !hasMeta || metaVersion == "":
		// A malformed request rather than a mismatch (Check says so).
		return Errorf(CodeInvalidParams, "%s: params._meta[%q] is required in protocol %s", msg.Method, MetaProtocolVersion, Version20260728)
	case version != metaVersion:
		return Errorf(CodeHeaderMismatch, "Header mismatch: MCP-Protocol-Version header value %q does not match body value %q", version, metaVersion)
	case method == "":
		return Errorf(CodeHeaderMismatch, "Header mismatch: the Mcp-Method header is required")
	case method != msg.Method:
		return Errorf(CodeHeaderMismatch, "Header mismatch: Mcp-Method header value %q does not match body value %q", method, msg.Method)
	}
	want, named := headerName(msg)
	if !named {
		return nil
	}
	if len(name) == 0 {
		return Errorf(CodeHeaderMismatch, "Header mismatch: the Mcp-Name header is required for %s", msg.Method)
	}
	if len(name) > 1 {
		return Errorf(CodeHeaderMismatch, "Header mismatch: one Mcp-Name header, not %d", len(name))
	}
	got, ok := HeaderValue(name[0])
	if !ok {
		return Errorf(CodeHeaderMismatch, "Header mismatch: the Mcp-Name header value is malformed")
	}
	if got != want {
		return Errorf(CodeHeaderMismatch, "Header mismatch: Mcp-Name header value %q does not match body value %q", got, want)
	}
	return nil
}

// headerName is the body value Mcp-Name mirrors, for the methods that
// have one: params.name of tools/call, params.taskId of the tasks
// extension's methods (SEP-2663, "Streamable HTTP: Routing Headers").
func headerName(msg *Message) (string, bool) {
	switch msg.Method {
	case "tools/call":
		p, _ := msg.paramsOf()
		return p.Name, true
	case "tasks/get", "tasks/update", "tasks/cancel":
		p, _ := msg.paramsOf()
		return p.TaskID, true
	}
	return "", false
}
