package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// catalog is the caller's catalog for their thread (mcpbus.tools.list),
// with what tool_search promoted there.
func (s *Server) catalog(ctx context.Context, x *Exchange) (bus.ToolsListReply, error) {
	return s.catalogWith(ctx, x, s.promoted(ctx, x))
}

// catalogWith is catalog with the thread's promoted tools already read.
func (s *Server) catalogWith(ctx context.Context, x *Exchange, promoted []string) (bus.ToolsListReply, error) {
	ctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	cat, err := bus.ListCatalog(ctx, s.deps.NC, s.deps.Names.ToolsList(),
		bus.ToolsListRequest{UserID: x.UserID, ThreadID: x.Thread(), Promoted: promoted, VirtualServer: x.VirtualServer})
	if err == nil {
		s.callTimeouts.learn(x.UserID, cat.Tools)
	}
	return cat, err
}

// mcpTool is a tool as tools/list shows it.
type mcpTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Execution    *toolExecution  `json:"execution,omitempty"`
	// Meta is the upstream tool's _meta, ui.resourceUri visible, with the
	// tool's definition digest (MetaToolDigest) added, which a client may
	// send back in a tools/call's _meta.
	Meta json.RawMessage `json:"_meta,omitempty"`
	// digest is the tool's definition digest (the session remembers it:
	// digests.go).
	digest string
}

// MetaToolDigest is the _meta key of a tool's definition digest: in
// tools/list, and in a tools/call to have the call refused (tool_changed)
// if the tool changed since it was listed (docs/tool-pinning.md).
const MetaToolDigest = "mcpbus/digest"

// MetaToolConnection is the _meta key of the caller's account state on
// a tool's server whose accounts people connect, when the caller's is not
// connected: {"state": "needs_auth"} (docs/connect-your-account.md).
const MetaToolConnection = "mcpbus/connection"

// metaOfTool is t's _meta: the upstream's, with the digest and the
// caller's account state added (nil when there is none of them).
func metaOfTool(t bus.Tool) json.RawMessage {
	if t.Digest == "" && t.Connection == "" {
		return t.Meta
	}
	m := map[string]json.RawMessage{}
	if len(t.Meta) > 0 && json.Unmarshal(t.Meta, &m) != nil {
		return t.Meta // not an object: passed on as it came
	}
	if t.Digest != "" {
		d, _ := json.Marshal(t.Digest)
		m[MetaToolDigest] = d
	}
	if t.Connection != "" {
		c, _ := json.Marshal(map[string]string{"state": t.Connection})
		m[MetaToolConnection] = c
	}
	out, err := json.Marshal(m)
	if err != nil {
		return t.Meta
	}
	return out
}

type listResult struct {
	Tools      []mcpTool `json:"tools"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// listTools is tools/list: the tools the caller binds (every tool, minus
// deferred ones not promoted when tool_search is on; task-toolset status
// and cancel tools are never in the agent catalog), in catalog order, a
// page at a time; tool_search first when the catalog defers tools. The
// list is built once per catalog revision (and caller, promoted tools and
// task view) and kept in s.views: a first page asks discovery for the
// current revision only (a one-tool page) and reads the whole catalog
// when no list of it is kept; a page by cursor slices the list of the
// cursor's revision, so a walk reads the catalog at most once.
func (s *Server) listTools(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return nil, Errorf(CodeInvalidParams, "tools/list params: %v", err)
	}
	var c listCursor
	if p.Cursor != nil {
		var ok bool
		if c, ok = decodeCursor(*p.Cursor); !ok {
			return nil, Errorf(CodeInvalidParams, "tools/list params: cursor is not one this server issued; list again without a cursor")
		}
	}
	promoted := s.promoted(ctx, x)
	key := viewKey{user: x.UserID, set: x.VirtualServer, tasks: taskSessions(x) || x.tasksExtension, promoted: strings.Join(promoted, "\n")}
	key.revision = c.revision
	if p.Cursor == nil {
		key.revision = s.revision(ctx, x)
	}
	tools, ok := s.views.get(key)
	if !ok {
		cat, err := s.catalogWith(ctx, x, promoted)
		if err != nil {
			return nil, s.busError(err, "tools/list")
		}
		tools = s.visibleTools(x, cat)
		key.revision = cat.Revision
		s.views.put(key, tools)
	}
	res := listResult{Tools: []mcpTool{}}
	if c.offset < len(tools) {
		end := min(c.offset+s.cfg.PageSize, len(tools))
		res.Tools = tools[c.offset:end]
		rememberDigests(x, res.Tools)
		if end < len(tools) {
			res.NextCursor = encodeCursor(listCursor{revision: key.revision, offset: end})
		}
	}
	return res, nil
}

// head is the first page, of one tool, of the caller's catalog: what it
// says of the whole catalog (revision, routing hints) without reading it.
func (s *Server) head(ctx context.Context, x *Exchange) (bus.ToolsListReply, error) {
	ctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	return bus.Request[bus.ToolsListReply](ctx, s.deps.NC, s.deps.Names.ToolsList(),
		bus.ToolsListRequest{UserID: x.UserID, ThreadID: x.Thread(), PageSize: 1, VirtualServer: x.VirtualServer})
}

// revision is the revision of the caller's current catalog ("" when it
// cannot be read: the catalog read that follows reports why).
func (s *Server) revision(ctx context.Context, x *Exchange) string {
	head, err := s.head(ctx, x)
	if err != nil {
		return ""
	}
	return head.Revision
}

// visibleTools is what tools/list shows x of cat: tool_search first when
// the catalog defers tools, then the tools to bind, in catalog order.
func (s *Server) visibleTools(x *Exchange, cat bus.ToolsListReply) []mcpTool {
	var tools []mcpTool
	if s.deps.Promotions != nil && slices.ContainsFunc(cat.Tools, func(t bus.Tool) bool { return t.Deferred }) {
		tools = append(tools, toolSearchTool)
	}
	bind := make(map[string]bool, len(cat.Bind))
	for _, n := range cat.Bind {
		bind[n] = true
	}
	for _, t := range cat.Tools {
		if !bind[t.Name] {
			continue
		}
		tools = append(tools, mcpTool{Name: t.Name, Description: t.Description, InputSchema: orObject(t.InputSchema),
			OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: executionOf(x, t), Meta: metaOfTool(t), digest: t.Digest})
	}
	return tools
}

// A listCursor is where a tools/list page starts: an offset into the list
// built from the catalog of revision. Cursors are opaque to clients: a
// version tag, the revision and the offset.
type listCursor struct {
	revision string
	offset   int
}

// cursorPrefix is the tag of the cursors this server issues; a cursor of
// the earlier "mcpbus1:<offset>" form is still read (as an offset into a
// freshly read catalog).
const (
	cursorPrefix   = "mcpbus2:"
	cursorPrefixV1 = "mcpbus1:"
)

func encodeCursor(c listCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + c.revision + ":" + strconv.Itoa(c.offset)))
}

func decodeCursor(s string) (listCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listCursor{}, false
	}
	var c listCursor
	var offset string
	switch str := string(raw); {
	case strings.HasPrefix(str, cursorPrefix):
		var found bool
		if c.revision, offset, found = strings.Cut(str[len(cursorPrefix):], ":"); !found {
			return listCursor{}, false
		}
	case strings.HasPrefix(str, cursorPrefixV1):
		offset = str[len(cursorPrefixV1):]
	default:
		return listCursor{}, false
	}
	n, err := strconv.Atoi(offset)
	c.offset = n
	return c, err == nil && n >= 0
}

func orObject(schema json.RawMessage) json.RawMessage {
	if len(schema) == 0 || string(schema) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return schema
}

// callParams is what mcpbus reads of a request's params, decoded once per
// message (Message.paramsOf): a tools/call's name, arguments and task,
// the name the Mcp-Name header mirrors (name, or a task method's taskId),
// and _meta's fields, the modern era's per-request protocol fields among
// them. Arguments stay raw.
type callParams struct {
	Name      string          `json:"name"`
	TaskID    string          `json:"taskId"`
	Arguments json.RawMessage `json:"arguments"`
	// Task is a 2025-11-25 task-augmented call's params.task.
	Task json.RawMessage `json:"task"`
	Meta requestMeta     `json:"_meta"`
	// InputResponses and RequestState are a 2026-07-28 client's retry of
	// an input_required answer (bridge.go).
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   string          `json:"requestState"`
}

type callResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
	Meta              json.RawMessage   `json:"_meta,omitempty"`
	// InputRequired is an upstream's multi-round-trip answer, relayed to
	// a modern client (bridge.go).
	InputRequired *bus.InputRequired `json:"-"`
}

// appendJSON appends r's JSON, as json.Marshal would write it, from its
// parts: content blocks, structuredContent and _meta are the bytes
// toolcall returned (decoded from the bus reply, so valid JSON), copied,
// not encoded again.
func (r callResult) appendJSON(b []byte) []byte {
	b = append(b, `{"content":[`...)
	for i, c := range r.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, c...)
	}
	b = append(b, ']')
	if len(r.StructuredContent) > 0 {
		b = append(b, `,"structuredContent":`...)
		b = append(b, r.StructuredContent...)
	}
	b = append(b, `,"isError":`...)
	b = strconv.AppendBool(b, r.IsError)
	if len(r.Meta) > 0 {
		b = append(b, `,"_meta":`...)
		b = append(b, r.Meta...)
	}
	return append(b, '}')
}

// callDecoded is tools/call through mcpbus.tools.call, shared by both
// eras' entries (legacyCall, Modern.callTool), with the request's JSON-RPC
// id and its params as decoded once: content blocks and structuredContent
// are the bytes toolcall returned. An unknown tool is a JSON-RPC error
// (unknownTool); any other refusal of a well-formed call is a result with
// isError true (refusal). With task set (bus.Call.Task) a call that made a
// durable task answers with the task as read back (createdTask). taskless
// says the caller cannot take a task (bus.Call.Taskless): a task-only tool
// is then toolcall's missing-capability error naming the tasks extension
// (capabilityError).
func (s *Server) callDecoded(ctx context.Context, x *Exchange, id json.RawMessage, p *callParams, task *bus.CallTask, taskless bool) (any, *Error) {
	if p.Name == "" {
		return nil, Errorf(CodeInvalidParams, "tools/call params: name is required")
	}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" && p.Arguments[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "tools/call params: arguments must be an object")
	}
	if p.Name == ToolSearchName && s.deps.Promotions != nil {
		return s.toolSearch(ctx, x, p.Arguments)
	}
	bctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	req := bus.Call{
		Tool: p.Name, Arguments: p.Arguments, UserID: x.UserID, ThreadID: x.Thread(), Promoted: s.promoted(bctx, x),
		CallID: callID(x, id), Task: task, Taskless: taskless, Digest: p.Meta.Digest, VirtualServer: x.VirtualServer,
		SessionDigest: listedDigest(x, p.Name),
	}
	if rerr := s.bridgeCall(ctx, x, p, &req); rerr != nil {
		return nil, rerr
	}
	relay := s.startRelay(x, p.Meta.ProgressToken, logLevel(x, p.Meta.LogLevel))
	if relay != nil {
		req.ProgressInbox, req.LogLevel = relay.inbox, relay.level
	}
	ask := s.newAsker(x, req.Tool)
	if ask != nil {
		defer ask.close()
		req.AskInbox = ask.inbox
	}
	reply, err := s.requestCallBounded(bctx, x, req, relay, ask)
	for n := 0; err == nil && reply.InputRequired != nil && x.Session != nil; n++ {
		// A legacy client cannot retry: mcpbus does (without progress:
		// the first request's relay has ended).
		in, rerr := s.legacyRound(bctx, x, reply, n)
		if rerr != nil {
			return nil, rerr
		}
		if in == nil {
			break
		}
		req.Input, req.ProgressInbox, req.LogLevel = in, "", ""
		reply, err = s.requestCallBounded(bctx, x, req, nil, ask)
	}
	if err != nil {
		e := bus.AsError(err)
		if e.Code == bus.CodeCancelled {
			return nil, &Error{Code: CodeRequestCancelled, Message: "tools/call: cancelled (notifications/cancelled)"}
		}
		if rerr := capabilityError(x, err); rerr != nil {
			return nil, rerr
		}
		if e.Code == bus.CodeNotFound {
			return nil, unknownTool(p.Name, e)
		}
		if rerr := authLink(x, p, err); rerr != nil {
			return nil, rerr
		}
		if res, ok := refusal(err); ok {
			return res, nil
		}
		return nil, s.busError(err, "tools/call")
	}
	if task != nil && reply.Task != nil {
		d, rerr := s.madeTask(ctx, x, reply)
		if rerr != nil {
			return nil, rerr
		}
		return createdTask{detail: d, message: reply.Task.Message}, nil
	}
	if reply.InputRequired != nil {
		return s.inputRequired(x, p, reply)
	}
	content := reply.Content
	if content == nil {
		content = []json.RawMessage{}
	}
	return callResult{Content: content, StructuredContent: reply.StructuredContent, IsError: reply.IsError, Meta: reply.Meta}, nil
}

// requestCallBounded is requestCall waiting at most the tool's timeout
// plus callGrace (callCtx).
func (s *Server) requestCallBounded(ctx context.Context, x *Exchange, req bus.ToolsCallRequest, relay *progressRelay, ask *asker) (bus.ToolsCallReply, error) {
	cctx, cancel, timeout := s.callCtx(ctx, x, req.Tool)
	defer cancel()
	reply, err := s.requestCall(cctx, req, relay, ask)
	return reply, callWaitError(ctx, cctx, err, req.Tool, timeout)
}

// requestCall sends mcpbus.tools.call; with a relay it relays the call's
// progress to the client while waiting, and what came before the reply
// once it is there; with an asker it answers the upstream's requests to
// the client (ask.go) while waiting. Both talk to the client on this
// goroutine (Exchange.Notify).
func (s *Server) requestCall(ctx context.Context, req bus.Call, relay *progressRelay, ask *asker) (bus.ToolsCallReply, error) {
	return requestRelayed[bus.ToolsCallReply](ctx, s, s.deps.Names.ToolsCall(), req, relay, ask)
}

// requestRelayed is a bus request on subject relaying, while it runs, its
// progress and log messages (relay) and answering its upstream's requests
// to the client (ask); either may be nil.
func requestRelayed[R any](ctx context.Context, s *Server, subject string, req any, relay *progressRelay, ask *asker) (R, error) {
	if relay == nil && ask == nil {
		return bus.Request[R](ctx, s.deps.NC, subject, req)
	}
	type outcome struct {
		reply R
		err   error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := bus.Request[R](ctx, s.deps.NC, subject, req)
		done <- outcome{r, err}
	}()
	var progress, asks chan *nats.Msg
	if relay != nil {
		progress = relay.msgs
	}
	if ask != nil {
		asks = ask.msgs
	}
	for {
		select {
		case m := <-progress:
			relay.send(m)
		case m := <-asks:
			ask.answer(ctx, m)
		case o := <-done:
			if relay != nil {
				relay.drain()
			}
			return o.reply, o.err
		}
	}
}

// nextStep tells the model what to do after mcpbus refused a call.
var nextStep = map[bus.Code]string{
	bus.CodeNotFound:           "Call tools/list to see the tools you can call.",
	bus.CodeToolDeferred:       "Search for it with the tool_search tool first, then call it again.",
	bus.CodeGuardrailDenied:    "A mcpbus guardrail refused this call: do not retry it unchanged; ask the user or an administrator.",
	bus.CodeForbidden:          "You may not call this tool; ask an administrator for access.",
	bus.CodeCredentialsMissing: "The tool's server needs credentials mcpbus does not have for you: ask the user to connect the server (or an administrator to configure it), then retry.",
	bus.CodeCredentialsInvalid: "The server refused the credentials mcpbus holds for you: ask the user to reconnect the server, then retry.",
	bus.CodeOAuthFailed:        "mcpbus could not obtain an access token for the server: ask the user to reconnect it, then retry.",
	bus.CodeAuthRequired:       "Give the user the link above: they open it in a browser and sign in, then retry.",
	bus.CodeUpstreamError:      "The tool's server failed: retry later or use another tool.",
	bus.CodeUpstreamTimeout:    "The tool did not answer in time: retry later, perhaps with a smaller request.",
	bus.CodeInitTimeout:        "The tool's server did not start in time: retry later.",
	bus.CodeConfigError:        "The tool's server is misconfigured: ask an administrator.",
	bus.CodeUnavailable:        "mcpbus cannot reach the service that runs tools right now: retry shortly.",
	bus.CodeRateLimited:        "A limit on your calls was reached: wait as the message says (for a call to finish, or for the window to end), then retry.",
	bus.CodeToolChanged:        "Call tools/list again and read the tool's new definition before calling it.",
}

// refusal turns mcpbus's refusal of a call into a tool result with isError
// true and a text saying what to do. invalid_request and internal stay
// JSON-RPC errors.
func refusal(err error) (callResult, bool) {
	e := bus.AsError(err)
	step, ok := nextStep[e.Code]
	if !ok {
		return callResult{}, false
	}
	text, _ := json.Marshal(map[string]string{"type": "text", "text": strings.TrimRight(e.Message, ". ") + ". " + step + " (mcpbus: " + string(e.Code) + ")"})
	return callResult{Content: []json.RawMessage{text}, IsError: true}, true
}

// unknownTool is the JSON-RPC error for a call of a tool the caller's
// catalog does not have (the bus's not_found): invalid params, as both the
// 2025-11-25 and the 2026-07-28 tools pages say ("Unknown tool" is a
// protocol error), with toolcall's reason and what to do in the message.
func unknownTool(name string, e *bus.Error) *Error {
	return &Error{Code: CodeInvalidParams,
		Message: "Unknown tool: " + name + " (" + strings.TrimRight(e.Message, ". ") + "). " + nextStep[bus.CodeNotFound],
		Data:    mustJSON(map[string]string{"mcpbus_code": string(bus.CodeNotFound)})}
}

// busError is a failed bus request as a JSON-RPC error: invalid_request is
// invalid params, anything else an internal error with the public message.
func (s *Server) busError(err error, what string) *Error {
	e := bus.AsError(err)
	if e.Code == bus.CodeInvalidRequest {
		return &Error{Code: CodeInvalidParams, Message: e.Message}
	}
	if e.Code == bus.CodeInternal {
		s.log.Error("mcp request failed", "method", what, observability.Err(err))
	}
	return &Error{Code: CodeInternalError, Message: what + ": " + e.Message, Data: mustJSON(map[string]string{"mcpbus_code": string(e.Code)})}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
