package toolcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Federation requests (docs/federation.md §3 and §8): resources/read,
// prompts/get and completion/complete take the tool-call path: scope, the
// in-flight caps, guardrails, resolution of the server (a deployment
// server or the caller's own personal connection), its interceptor chain
// (credentials), the route (a stdio session is the caller's user:thread
// one, handed over to its owning replica), the response cap and an audit
// record. Only the invoke step differs: it sends the upcall's fedOp
// instead of tools/call. A JSON-RPC error of the upstream is the
// op's rpcError, not a failed session.

// fedOp is one federation request to an upstream; the invoke step (or
// the replica a stdio call was handed to) stores the answer in it.
type fedOp struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	// Subscription is set for resources/subscribe and /unsubscribe
	// (subscriptions.go).
	Subscription *subOp `json:"subscription,omitempty"`

	result   json.RawMessage
	rpcError *bus.RPCError
	// required is a modern upstream's input_required answer to a bridged
	// prompts/get (bridge.go), set once the request ran.
	required *bus.InputRequired
}

// callFed is the invoke step of a federation request, with the upstream
// options of its call (progress, log messages, bridged input, headers).
func callFed(ctx context.Context, c *mcpclient.Client, op *fedOp, opts *mcpclient.CallOptions) (*mcpclient.CallResult, error) {
	raw, err := c.Request(ctx, op.Method, op.Params, opts)
	if ir := mcpclient.InputRequiredOf(raw); err == nil && ir != nil {
		// A multi-round-trip answer: the invoke step's bridging takes it
		// (bridge.go).
		op.result = raw
		return &mcpclient.CallResult{Content: []json.RawMessage{}, InputRequired: ir}, nil
	}
	var rpc *mcpclient.RPCError
	if errors.As(err, &rpc) {
		op.rpcError = &bus.RPCError{Code: rpc.Code, Message: rpc.Message}
		return &mcpclient.CallResult{Content: []json.RawMessage{}}, nil
	}
	if err != nil {
		return nil, err
	}
	op.result = raw
	return &mcpclient.CallResult{Content: []json.RawMessage{}}, nil
}

// Upstream JSON-RPC codes a federation request maps to not_found.
const (
	rpcResourceNotFound = -32002
	rpcInvalidParams    = -32602
)

// fedRequest is one federation request after admission.
type fedRequest struct {
	op      *fedOp
	kind    string // guardrail kind
	server  string // the server it names
	rawURI  string // a read's or subscription's raw URI
	label   string // the prompt name or the URI without its query (audit, interceptors)
	sc      bus.Scope
	secrets map[string]string
	timeout int64
	// inbox and logLevel are the request's progress_inbox and log_level:
	// the upstream's progress and log messages of the request go there
	// (followCall), as for a tool call.
	inbox, logLevel string
	// caps and input are a prompts/get's bridging fields (bridge.go).
	caps  *bus.ClientCapabilities
	input *bus.CallInput
	// unmapped is the error for a server that is not the caller's.
	unmapped func() error
	// set is the virtual server the request came through (nil: none);
	// what it does not hold is refused, and audited, before anything
	// else runs (fedInSet).
	set *virtual.Set
}

// runFed runs r through the pipeline and returns the upstream's result.
func (s *Service) runFed(ctx context.Context, r fedRequest) (_ json.RawMessage, err error) {
	start := time.Now()
	srvName := ""
	defer func() { s.auditFed(ctx, r, srvName, err, time.Since(start)) }()
	if err := checkScope(r.sc); err != nil {
		return nil, err
	}
	if err := fedInSet(r); err != nil {
		return nil, err
	}
	// The request as a Call, like a tool call's: the upcall carries it,
	// and the op, to the upstream (and in a hand-over).
	u := newUpcall(bus.Call{Tool: r.label, UserID: r.sc.UserID, ThreadID: r.sc.ThreadID, TimeoutMS: r.timeout,
		ProgressInbox: r.inbox, LogLevel: r.logLevel, ClientCapabilities: r.caps, Input: r.input})
	u.fed = r.op
	_, u.userBound = bus.BoundUser(ctx)
	ctx, untrack, err := s.followCall(ctx, u)
	if err != nil {
		return nil, err
	}
	defer untrack()
	if err := s.admitInFlight(s.userCalls, limitUser, r.sc.User()); err != nil {
		return nil, err
	}
	defer s.userCalls.Release(r.sc.User())
	ctx, cancel := withTimeoutMS(ctx, r.timeout)
	defer cancel()
	ext, _, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	var t target
	if srv := serverOf(ext, r.server); srv != nil && srv.Enabled {
		t = target{srv: srv}
	} else if r.sc.UserID != "" && bus.PersonalRuntimeNamePattern.MatchString(r.server) {
		if t, err = s.personalTarget(ctx, r.sc.UserID, r.server); err != nil {
			if be := bus.AsError(err); be.Code == bus.CodeNotFound {
				return nil, r.unmapped()
			}
			return nil, err
		}
	} else {
		return nil, r.unmapped()
	}
	srvName = t.srv.Name
	gr := bus.GuardrailRequest{Kind: r.kind, Server: t.srv.Name, URI: r.rawURI, UserID: r.sc.User(), ThreadID: r.sc.Thread()}
	if r.kind == bus.GuardrailKindPrompt {
		gr.Tool = r.label
	}
	if err := s.guard.Check(ctx, gr); err != nil {
		return nil, err
	}
	if err := s.admitInFlight(s.serverCalls, limitServer, t.srv.Name); err != nil {
		return nil, err
	}
	defer s.serverCalls.Release(t.srv.Name)
	ireq, err := assemble(t, r.sc, r.op.Method, r.label, nil)
	if err != nil {
		return nil, err
	}
	ireq.Secrets = r.secrets
	if _, err := s.handler(t, ext, chainCall).run(ctx, u, ireq); err != nil {
		return nil, err
	}
	r.op.required = u.required
	if rpc := r.op.rpcError; rpc != nil {
		code := bus.CodeUpstreamError
		if rpc.Code == rpcResourceNotFound || rpc.Code == rpcInvalidParams {
			code = bus.CodeNotFound
		}
		e := bus.Errorf(code, "server '%s': %s", t.srv.Name, rpc.Message)
		e.Details = map[string]any{"server": t.srv.Name, "upstream_code": rpc.Code}
		return nil, bus.Redact(e, t.srv.Redactor())
	}
	if r.op.result == nil {
		// An interceptor answered in the upstream's place: it cannot
		// answer a federation request.
		return nil, bus.Errorf(bus.CodeUpstreamError, "%s on MCP server '%s': an interceptor answered instead of the server", r.op.Method, t.srv.Name)
	}
	if max := s.deps.NC.MaxPayload(); max > 0 && int64(len(r.op.result)) > max-1024 {
		return nil, bus.Errorf(bus.CodeUpstreamError, "%s on MCP server '%s': the response (%d bytes) is larger than the bus's max_payload (%d bytes)", r.op.Method, t.srv.Name, len(r.op.result), max)
	}
	return r.op.result, nil
}

// auditFed writes the audit record of a federation request: its method
// and label (the prompt name, or the raw URI without query and fragment)
// as the tool.
func (s *Service) auditFed(ctx context.Context, r fedRequest, server string, err error, took time.Duration) {
	if !s.deps.Audit.Enabled() || (err == nil && r.op.isRefresh()) {
		// A subscription's refresh (every bus.SubscriptionRefreshSeconds
		// while its stream is open) is no new subscribe.
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = string(bus.AsError(err).Code)
	}
	rec := audit.Record{Kind: audit.KindCall, User: r.sc.User(), Thread: r.sc.Thread(),
		Tool: r.op.Method + " " + r.label, Server: server, Outcome: outcome, DurationMS: float64(took.Microseconds()) / 1000,
		ResultBytes: len(r.op.result)}
	if r.set != nil {
		rec.VirtualServer, rec.Policy = r.set.Name(), "allowed"
		if be := bus.AsError(err); err != nil && be.Code == bus.CodeForbidden {
			if p, ok := be.Details["policy"].(string); ok {
				rec.Policy = p
			}
		}
	}
	s.deps.Audit.Write(ctx, rec)
}

// secretsOf is a request's context.secrets.
func secretsOf(c *bus.CallContext) map[string]string {
	if c == nil {
		return nil
	}
	return c.Secrets
}

// handleRead serves mcpbus.resources.read.
func (s *Service) handleRead(ctx context.Context, req bus.ResourcesReadRequest) (bus.ResourcesReadReply, error) {
	if req.URI == "" {
		return bus.ResourcesReadReply{}, bus.Errorf(bus.CodeInvalidRequest, "uri: required")
	}
	if err := bus.RejectMetadataAuthToken(req.Metadata); err != nil {
		return bus.ResourcesReadReply{}, err
	}
	set, err := s.fedSet(ctx, req.VirtualServer)
	if err != nil {
		return bus.ResourcesReadReply{}, err
	}
	server, raw, err := s.resolveURI(ctx, req.UserID, req.ThreadID, req.URI)
	if err := fedLookup(set, "resource '"+req.URI+"'", err); err != nil {
		return bus.ResourcesReadReply{}, err
	}
	if err := req.ClientCapabilities.Validate(); err != nil {
		return bus.ResourcesReadReply{}, err
	}
	if err := req.Input.Validate(); err != nil {
		return bus.ResourcesReadReply{}, err
	}
	params, _ := json.Marshal(map[string]string{"uri": raw})
	op := &fedOp{Method: mcpclient.MethodResourcesRead, Params: params}
	res, err := s.runFed(ctx, fedRequest{op: op,
		kind: bus.GuardrailKindResource, server: server, rawURI: raw, label: bus.StripQuery(raw),
		sc: bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}, secrets: secretsOf(req.Context), timeout: req.TimeoutMS,
		inbox: req.ProgressInbox, logLevel: req.LogLevel, set: set, caps: req.ClientCapabilities, input: req.Input,
		unmapped: func() error { return bus.UnmappedURI(server) }})
	if err != nil {
		return bus.ResourcesReadReply{}, err
	}
	if op.required != nil {
		return bus.ResourcesReadReply{URI: req.URI, Server: server, Contents: []json.RawMessage{}, InputRequired: op.required}, nil
	}
	// The result is valid JSON (it was decoded off the upstream's
	// stream): its contents are found, not decoded (bus.Member).
	contents := []json.RawMessage{}
	if start, end, _, _, ok := bus.Member(res, "contents"); ok {
		if contents, ok = bus.Elements(res[start:end]); !ok {
			return bus.ResourcesReadReply{}, bus.Errorf(bus.CodeUpstreamError, "resources/read on MCP server '%s': the result is not a ReadResourceResult (contents is not an array)", server)
		}
	} else if !bytes.HasPrefix(bytes.TrimSpace(res), []byte("{")) {
		return bus.ResourcesReadReply{}, bus.Errorf(bus.CodeUpstreamError, "resources/read on MCP server '%s': the result is not a ReadResourceResult", server)
	}
	if s.prefixed(server) {
		for i, c := range contents {
			contents[i] = bus.RewriteContents(server, c)
		}
	}
	return bus.ResourcesReadReply{URI: req.URI, Server: server, Contents: contents}, nil
}

// handlePromptGet serves mcpbus.prompts.get: the visible name is looked up
// in the caller's prompts (discovery's mcpbus.prompts.list).
func (s *Service) handlePromptGet(ctx context.Context, req bus.PromptsGetRequest) (bus.PromptsGetReply, error) {
	if req.Name == "" {
		return bus.PromptsGetReply{}, bus.Errorf(bus.CodeInvalidRequest, "name: required")
	}
	if err := bus.RejectMetadataAuthToken(req.Metadata); err != nil {
		return bus.PromptsGetReply{}, err
	}
	args, err := promptArguments(req.Arguments)
	if err != nil {
		return bus.PromptsGetReply{}, err
	}
	set, err := s.fedSet(ctx, req.VirtualServer)
	if err != nil {
		return bus.PromptsGetReply{}, err
	}
	p, err := s.findPrompt(ctx, req.UserID, req.ThreadID, req.Name)
	if err := fedLookup(set, "prompt '"+req.Name+"'", err); err != nil {
		return bus.PromptsGetReply{}, err
	}
	if err := req.ClientCapabilities.Validate(); err != nil {
		return bus.PromptsGetReply{}, err
	}
	if err := req.Input.Validate(); err != nil {
		return bus.PromptsGetReply{}, err
	}
	params := map[string]any{"name": p.OriginalName}
	if args != nil {
		params["arguments"] = args
	}
	pb, _ := json.Marshal(params)
	op := &fedOp{Method: mcpclient.MethodPromptsGet, Params: pb}
	res, err := s.runFed(ctx, fedRequest{op: op,
		kind: bus.GuardrailKindPrompt, server: p.Server, label: req.Name,
		sc: bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}, secrets: secretsOf(req.Context), timeout: req.TimeoutMS,
		inbox: req.ProgressInbox, logLevel: req.LogLevel, set: set, caps: req.ClientCapabilities, input: req.Input,
		unmapped: func() error { return unknownPrompt(req.Name) }})
	if err != nil {
		return bus.PromptsGetReply{}, err
	}
	if op.required != nil {
		return bus.PromptsGetReply{Name: req.Name, Server: p.Server, Messages: []json.RawMessage{}, InputRequired: op.required}, nil
	}
	var out struct {
		Description string            `json:"description"`
		Messages    []json.RawMessage `json:"messages"`
		Meta        json.RawMessage   `json:"_meta"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		return bus.PromptsGetReply{}, bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("prompts/get on MCP server '%s': the result is not a GetPromptResult", p.Server))
	}
	if out.Messages == nil {
		out.Messages = []json.RawMessage{}
	}
	if s.prefixed(p.Server) {
		out.Messages = bus.RewriteMessages(p.Server, out.Messages)
	}
	return bus.PromptsGetReply{Name: req.Name, Server: p.Server, Description: out.Description,
		Messages: out.Messages, Meta: out.Meta}, nil
}

// promptArguments checks a prompt's arguments: an object of strings.
func promptArguments(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, bus.Errorf(bus.CodeInvalidRequest, "arguments: must be a JSON object")
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return nil, bus.Errorf(bus.CodeInvalidRequest, "arguments.%s: must be a string", k)
		}
		out[k] = str
	}
	return out, nil
}

func unknownPrompt(name string) error {
	return bus.Errorf(bus.CodeNotFound, "prompt '%s' is not one of your prompts", bus.SafeServerName(name))
}

// findPrompt is the caller's prompt named name.
func (s *Service) findPrompt(ctx context.Context, user, thread, name string) (bus.Prompt, error) {
	list, err := bus.Request[bus.PromptsListReply](ctx, s.deps.NC, s.deps.Names.PromptsList(), bus.FedListRequest{UserID: user, ThreadID: thread})
	if err != nil {
		return bus.Prompt{}, err
	}
	for _, p := range list.Prompts {
		if p.Name == name {
			return p, nil
		}
	}
	return bus.Prompt{}, unknownPrompt(name)
}

// handleComplete serves mcpbus.completion.complete: a prompt argument's
// completion from the prompt's server, a resource template argument's from
// the template's. A server without the completions capability answers
// no values (its request is not sent).
func (s *Service) handleComplete(ctx context.Context, req bus.CompletionRequest) (bus.CompletionReply, error) {
	if req.Argument.Name == "" {
		return bus.CompletionReply{}, bus.Errorf(bus.CodeInvalidRequest, "argument.name: required")
	}
	set, err := s.fedSet(ctx, req.VirtualServer)
	if err != nil {
		return bus.CompletionReply{}, err
	}
	sc := bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}
	ref := map[string]string{"type": req.Ref.Type}
	fr := fedRequest{kind: bus.GuardrailKindCompletion, sc: sc, secrets: secretsOf(req.Context), timeout: req.TimeoutMS, set: set}
	switch req.Ref.Type {
	case bus.RefPrompt:
		if req.Ref.Name == "" {
			return bus.CompletionReply{}, bus.Errorf(bus.CodeInvalidRequest, "ref.name: required for ref/prompt")
		}
		p, err := s.findPrompt(ctx, req.UserID, req.ThreadID, req.Ref.Name)
		if err := fedLookup(set, "prompt '"+req.Ref.Name+"'", err); err != nil {
			return bus.CompletionReply{}, err
		}
		ref["name"], fr.server, fr.label = p.OriginalName, p.Server, req.Ref.Name
		fr.kind = bus.GuardrailKindPrompt
		fr.unmapped = func() error { return unknownPrompt(req.Ref.Name) }
	case bus.RefResource:
		server, raw, err := s.resolveURI(ctx, req.UserID, req.ThreadID, req.Ref.URI)
		if err := fedLookup(set, "resource '"+req.Ref.URI+"'", err); err != nil {
			return bus.CompletionReply{}, err
		}
		ref["uri"], fr.server, fr.label = raw, server, bus.StripQuery(raw)
		fr.kind = bus.GuardrailKindResource
		fr.unmapped = func() error { return bus.UnmappedURI(server) }
	default:
		return bus.CompletionReply{}, bus.Errorf(bus.CodeInvalidRequest, "ref.type: must be ref/prompt or ref/resource")
	}
	params := map[string]any{"ref": ref, "argument": req.Argument}
	if len(req.ContextArguments) > 0 {
		params["context"] = map[string]any{"arguments": req.ContextArguments}
	}
	fr.op = &fedOp{Method: mcpclient.MethodCompletionComplete}
	fr.op.Params, _ = json.Marshal(params)
	res, err := s.runFed(ctx, fr)
	if err != nil {
		if rpc := bus.AsError(err); rpc.Code == bus.CodeUpstreamError && rpc.Details["upstream_code"] == -32601 {
			// The server does not complete.
			return bus.CompletionReply{Server: fr.server, Completion: json.RawMessage(`{"values":[]}`)}, nil
		}
		return bus.CompletionReply{}, err
	}
	var out struct {
		Completion json.RawMessage `json:"completion"`
	}
	if err := json.Unmarshal(res, &out); err != nil || len(out.Completion) == 0 {
		return bus.CompletionReply{}, bus.Errorf(bus.CodeUpstreamError, "completion/complete on MCP server '%s': the result is not a CompleteResult", fr.server)
	}
	return bus.CompletionReply{Server: fr.server, Completion: out.Completion}, nil
}

// prefixed reports whether server's URIs are shown in the visible form:
// every server but a deployment server with tool_name_prefix false.
func (s *Service) prefixed(server string) bool {
	srv := serverOf(s.watcher.Current().Extensions, server)
	return srv == nil || srv.ToolNamePrefix
}

// rewriteBlocks is a tool result's content with its resource URIs
// visible (unchanged for a server without a prefix).
func rewriteBlocks(t target, blocks []json.RawMessage) []json.RawMessage {
	if !t.srv.ToolNamePrefix && !t.personal() {
		return blocks
	}
	return bus.RewriteBlocks(t.srv.Name, blocks)
}

// resolveURI is the server and raw URI a client's URI names: the visible
// forms decode (docs/federation.md, "Decoding"); any other URI is a raw
// URI of a deployment server with tool_name_prefix false: the one that
// lists it, else the only such server of the caller that declares
// resources. A raw URI two such servers list, or one no such server can
// own, is not_found, never sent to a server that may not own it.
func (s *Service) resolveURI(ctx context.Context, user, thread, uri string) (server, raw string, err error) {
	if server, raw, ok := bus.ParseVisibleURI(uri); ok {
		return server, raw, nil
	}
	ext := s.watcher.Current().Extensions
	unprefixed := func(name string) bool {
		srv := serverOf(ext, name)
		return srv != nil && srv.Enabled && !srv.ToolNamePrefix
	}
	req := bus.FedListRequest{UserID: user, ThreadID: thread}
	res, err := bus.Request[bus.ResourcesListReply](ctx, s.deps.NC, s.deps.Names.ResourcesList(), req)
	if err != nil {
		return "", "", err
	}
	owners := map[string]bool{}
	for _, r := range res.Resources {
		if r.URI == uri && unprefixed(r.Server) {
			owners[r.Server] = true
		}
	}
	if len(owners) == 0 {
		tpl, err := bus.Request[bus.ResourceTemplatesListReply](ctx, s.deps.NC, s.deps.Names.ResourceTemplatesList(), req)
		if err != nil {
			return "", "", err
		}
		for _, r := range res.Resources {
			if unprefixed(r.Server) {
				owners[r.Server] = true
			}
		}
		for _, t := range tpl.ResourceTemplates {
			if unprefixed(t.Server) {
				owners[t.Server] = true
			}
		}
	}
	if len(owners) != 1 {
		if len(owners) > 1 {
			return "", "", bus.Errorf(bus.CodeNotFound, "resource URI is listed by %d MCP servers without a name prefix; read it as mcpbus://<server>/<uri>", len(owners))
		}
		return "", "", bus.NotResourceURI()
	}
	for name := range owners {
		server = name
	}
	return server, uri, nil
}
