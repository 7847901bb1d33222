package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Federation (docs/federation.md §7): resources/list,
// resources/templates/list and prompts/list page over discovery's lists
// (mcpbus.resources.list, .resources.templates.list, .prompts.list; the
// MCP cursor is the bus cursor), resources/read, prompts/get and
// completion/complete go to toolcall (mcpbus.resources.read, .prompts.get,
// .completion.complete). Names and URIs are the visible ones throughout.
// An unmapped URI or an unknown prompt is -32602; an upstream's JSON-RPC
// error keeps its code with the message naming the server; other bus
// codes are -32603 with data.mcpbus_code.

// fedCapabilities are the capabilities of what is served besides tools.
func fedCapabilities(caps map[string]any) map[string]any {
	caps["resources"] = map[string]any{"listChanged": true, "subscribe": true}
	caps["prompts"] = map[string]any{"listChanged": true}
	caps["completions"] = map[string]any{}
	return caps
}

// fedMeta is what a read's or prompts/get's _meta asks for: progress
// and (2026-07-28) log messages, as for tools/call.
type fedMeta struct {
	ProgressToken      json.RawMessage `json:"progressToken"`
	LogLevel           string          `json:"io.modelcontextprotocol/logLevel"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
}

// listParams are the params of every list method.
type listParams struct {
	Cursor string `json:"cursor"`
}

func (s *Server) fedListRequest(x *Exchange, params json.RawMessage) (bus.FedListRequest, *Error) {
	var p listParams
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return bus.FedListRequest{}, Errorf(CodeInvalidParams, "params: %v", err)
	}
	return bus.FedListRequest{UserID: x.UserID, ThreadID: x.Thread(), PageSize: s.cfg.PageSize, Cursor: p.Cursor, VirtualServer: x.VirtualServer}, nil
}

// fedList asks subject for one page of a federated list.
func fedList[R any](ctx context.Context, s *Server, x *Exchange, params json.RawMessage, subject, what string) (R, *Error) {
	var zero R
	req, rerr := s.fedListRequest(x, params)
	if rerr != nil {
		return zero, rerr
	}
	ctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	out, err := bus.Request[R](ctx, s.deps.NC, subject, req)
	if err != nil {
		return zero, s.fedError(err, what)
	}
	return out, nil
}

func (s *Server) listResources(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	out, rerr := fedList[bus.ResourcesListReply](ctx, s, x, params, s.deps.Names.ResourcesList(), "resources/list")
	if rerr != nil {
		return nil, rerr
	}
	items := make([]bus.MCPResource, len(out.Resources))
	for i, r := range out.Resources {
		items[i] = r.MCPResource
	}
	return struct {
		Resources  []bus.MCPResource `json:"resources"`
		NextCursor string            `json:"nextCursor,omitempty"`
	}{items, out.NextCursor}, nil
}

func (s *Server) listTemplates(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	out, rerr := fedList[bus.ResourceTemplatesListReply](ctx, s, x, params, s.deps.Names.ResourceTemplatesList(), "resources/templates/list")
	if rerr != nil {
		return nil, rerr
	}
	items := make([]bus.MCPResourceTemplate, len(out.ResourceTemplates))
	for i, t := range out.ResourceTemplates {
		items[i] = t.MCPResourceTemplate
	}
	return struct {
		ResourceTemplates []bus.MCPResourceTemplate `json:"resourceTemplates"`
		NextCursor        string                    `json:"nextCursor,omitempty"`
	}{items, out.NextCursor}, nil
}

func (s *Server) listPrompts(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	out, rerr := fedList[bus.PromptsListReply](ctx, s, x, params, s.deps.Names.PromptsList(), "prompts/list")
	if rerr != nil {
		return nil, rerr
	}
	items := make([]bus.MCPPrompt, len(out.Prompts))
	for i, p := range out.Prompts {
		items[i] = p.MCPPrompt
	}
	return struct {
		Prompts    []bus.MCPPrompt `json:"prompts"`
		NextCursor string          `json:"nextCursor,omitempty"`
	}{items, out.NextCursor}, nil
}

// readResource is resources/read.
func (s *Server) readResource(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p struct {
		URI            string          `json:"uri"`
		Meta           fedMeta         `json:"_meta"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   string          `json:"requestState"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil || p.URI == "" {
		return nil, Errorf(CodeInvalidParams, "resources/read params: uri is required")
	}
	ctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	req := bus.ResourcesReadRequest{URI: p.URI, UserID: x.UserID, ThreadID: x.Thread(), VirtualServer: x.VirtualServer}
	// Bridged as prompts/get is: the requestState sealed to the caller,
	// thread and URI.
	bp, rerr := s.bridgeFed(ctx, x, "resources/read "+p.URI, nil, p.Meta, p.InputResponses, p.RequestState, &req.ClientCapabilities, &req.Input)
	if rerr != nil {
		return nil, rerr
	}
	relay := s.startRelay(x, p.Meta.ProgressToken, logLevel(x, p.Meta.LogLevel))
	if relay != nil {
		req.ProgressInbox, req.LogLevel = relay.inbox, relay.level
	}
	// The contents pass as the bytes toolcall sent (readReply).
	out, err := requestRelayed[readReply](ctx, s, s.deps.Names.ResourcesRead(), req, relay, nil)
	if err != nil {
		if rerr := capabilityError(x, err); rerr != nil {
			return nil, rerr
		}
		rerr := s.fedError(err, "resources/read")
		if rerr.Code == CodeInvalidParams {
			// SEP-2164: a resource not found names the URI in data, without
			// its query and fragment (a query may carry a token).
			rerr.Data = mustJSON(map[string]string{"mcpbus_code": string(bus.AsError(err).Code), "uri": bus.StripQuery(p.URI)})
		}
		return nil, rerr
	}
	if out.InputRequired != nil {
		return s.inputRequiredResult(x, bp, out.InputRequired)
	}
	return readResult{out.Contents}, nil
}

// readReply is the part of bus.ResourcesReadReply /mcp serves, its
// contents undecoded.
type readReply struct {
	Contents      json.RawMessage    `json:"contents"`
	InputRequired *bus.InputRequired `json:"input_required,omitempty"`
}

// bridgeFed bridges a 2026-07-28 request other than tools/call (a read, a
// prompts/get) as bridge.go bridges calls: name (the method and what it
// names) and args bind its sealed requestState; caps and input receive
// the bus request's bridging fields. A legacy session's request carries
// none (mcpbus does not ask a legacy client for a read's or a prompt's
// input).
func (s *Server) bridgeFed(ctx context.Context, x *Exchange, name string, args json.RawMessage, meta fedMeta, responses json.RawMessage, state string,
	caps **bus.ClientCapabilities, input **bus.CallInput) (*callParams, *Error) {
	bp := &callParams{Name: name, Arguments: args, InputResponses: responses, RequestState: state}
	bp.Meta.ClientCapabilities = meta.ClientCapabilities
	if x.Session != nil {
		return bp, nil
	}
	var bridged bus.Call
	if rerr := s.bridgeCall(ctx, x, bp, &bridged); rerr != nil {
		return nil, rerr
	}
	*caps, *input = bridged.ClientCapabilities, bridged.Input
	return bp, nil
}

// inputRequiredResult is an upstream's multi-round-trip answer to a read
// or a prompts/get as the client's own: its requestState sealed (bp).
func (s *Server) inputRequiredResult(x *Exchange, bp *callParams, ir *bus.InputRequired) (any, *Error) {
	state, rerr := s.sealState(x, bp, ir.RequestState)
	if rerr != nil {
		return nil, rerr
	}
	return struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests,omitempty"`
		RequestState  string          `json:"requestState,omitempty"`
	}{"input_required", ir.InputRequests, state}, nil
}

// readResult is a resources/read result: the contents array as toolcall
// sent it (valid JSON, already compact).
type readResult struct {
	Contents json.RawMessage
}

// appendJSON appends the result's JSON with extra members (each
// `,"key":value`) before the closing brace, the contents as they came.
func (r readResult) appendJSON(out []byte, extra ...string) []byte {
	contents := r.Contents
	if len(contents) == 0 {
		contents = json.RawMessage("[]")
	}
	out = append(append(out, `{"contents":`...), contents...)
	for _, e := range extra {
		out = append(out, e...)
	}
	return append(out, '}')
}

// MarshalJSON implements json.Marshaler (Reply and the modern era write
// it with appendJSON instead).
func (r readResult) MarshalJSON() ([]byte, error) { return r.appendJSON(nil), nil }

// getPrompt is prompts/get.
func (s *Server) getPrompt(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p struct {
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		Meta           fedMeta         `json:"_meta"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   string          `json:"requestState"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil || p.Name == "" {
		return nil, Errorf(CodeInvalidParams, "prompts/get params: name is required")
	}
	ctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	req := bus.PromptsGetRequest{Name: p.Name, Arguments: p.Arguments, UserID: x.UserID, ThreadID: x.Thread(), VirtualServer: x.VirtualServer}
	// A 2026-07-28 multi-round-trip answer is bridged as for tools/call
	// (bridge.go): its requestState sealed to the caller, thread, prompt
	// and arguments.
	bp, rerr := s.bridgeFed(ctx, x, "prompts/get "+p.Name, p.Arguments, p.Meta, p.InputResponses, p.RequestState, &req.ClientCapabilities, &req.Input)
	if rerr != nil {
		return nil, rerr
	}
	relay := s.startRelay(x, p.Meta.ProgressToken, logLevel(x, p.Meta.LogLevel))
	if relay != nil {
		req.ProgressInbox, req.LogLevel = relay.inbox, relay.level
	}
	out, err := requestRelayed[bus.PromptsGetReply](ctx, s, s.deps.Names.PromptsGet(), req, relay, nil)
	if err != nil {
		if rerr := capabilityError(x, err); rerr != nil {
			return nil, rerr
		}
		return nil, s.fedError(err, "prompts/get")
	}
	if ir := out.InputRequired; ir != nil {
		return s.inputRequiredResult(x, bp, ir)
	}
	return struct {
		Description string            `json:"description,omitempty"`
		Messages    []json.RawMessage `json:"messages"`
		Meta        json.RawMessage   `json:"_meta,omitempty"`
	}{out.Description, out.Messages, out.Meta}, nil
}

// complete is completion/complete.
func (s *Server) complete(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p struct {
		Ref      bus.CompletionRef      `json:"ref"`
		Argument bus.CompletionArgument `json:"argument"`
		Context  struct {
			Arguments map[string]string `json:"arguments"`
		} `json:"context"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return nil, Errorf(CodeInvalidParams, "completion/complete params: %v", err)
	}
	ctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	out, err := bus.Request[bus.CompletionReply](ctx, s.deps.NC, s.deps.Names.CompletionComplete(),
		bus.CompletionRequest{Ref: p.Ref, Argument: p.Argument, ContextArguments: p.Context.Arguments, UserID: x.UserID, ThreadID: x.Thread(), VirtualServer: x.VirtualServer})
	if err != nil {
		return nil, s.fedError(err, "completion/complete")
	}
	return struct {
		Completion json.RawMessage `json:"completion"`
	}{out.Completion}, nil
}

// fedError is a failed federation request as a JSON-RPC error.
func (s *Server) fedError(err error, what string) *Error {
	e := bus.AsError(err)
	switch {
	case e.Code == bus.CodeNotFound:
		return &Error{Code: CodeInvalidParams, Message: e.Message, Data: mustJSON(map[string]string{"mcpbus_code": string(e.Code)})}
	case e.Code == bus.CodeUpstreamError && e.Details["upstream_code"] != nil:
		if code, ok := e.Details["upstream_code"].(float64); ok {
			return &Error{Code: int(code), Message: e.Message}
		}
	}
	return s.busError(err, what)
}

// fedCaching is how a federation result may be cached by a modern
// client: lists for the catalog TTL, a read not at all (ttlMs 0: the
// content is the upstream's of this moment), others without hints.
type fedCaching int

const (
	cacheNone fedCaching = iota
	cacheList
	cacheRead
)

// addFedMethods adds the federation methods to an era's table; wrap
// turns a result into the era's form.
func (s *Server) addFedMethods(methods map[string]method, wrap func(m method, c fedCaching) method) {
	for name, m := range map[string]struct {
		fn method
		c  fedCaching
	}{
		"resources/list":           {s.listResources, cacheList},
		"resources/templates/list": {s.listTemplates, cacheList},
		"prompts/list":             {s.listPrompts, cacheList},
		"resources/read":           {s.readResource, cacheRead},
		"prompts/get":              {s.getPrompt, cacheNone},
		"completion/complete":      {s.complete, cacheNone},
	} {
		methods[name] = wrap(m.fn, m.c)
	}
}
