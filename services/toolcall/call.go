package toolcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// handleCall serves mcpbus.tools.call. Order: admission (nothing runs for a
// malformed request or a legacy metadata.auth_token), guardrails on the
// visible name, resolution through the catalog, the server's interceptor
// chain (which adds the credentials), and the upstream call.
func (s *Service) handleCall(ctx context.Context, req bus.ToolsCallRequest) (_ bus.ToolsCallReply, err error) {
	if req.Tool == "" {
		return bus.ToolsCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "tool is required")
	}
	if err := req.RejectAuthToken(); err != nil {
		return bus.ToolsCallReply{}, err
	}
	if a := bytes.TrimSpace(req.Arguments); len(a) > 0 && string(a) != "null" {
		// The body decoded, so a is valid JSON; it must be an object.
		if a[0] != '{' {
			return bus.ToolsCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "arguments must be a JSON object")
		}
	}
	user, thread, err := scopeIDs(req)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	ctx, untrack, err := s.followCall(ctx, req.CallID, req.ProgressInbox, req.UserID)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	defer untrack()
	// Cancelled at any step (resolution, credentials, the hand-over, the
	// upstream call): the reply says so.
	cancelled := ctx
	defer func() {
		if err != nil && callerCancelled(cancelled) {
			err = cancelledError(req.Tool)
		}
	}()
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	if err := s.guard.Check(ctx, bus.GuardrailRequest{
		Tool: req.Tool, Arguments: req.Arguments, UserID: user, ThreadID: thread, RunID: req.RunID, ToolCallID: req.ToolCallID,
	}); err != nil {
		return bus.ToolsCallReply{}, err
	}

	snap := s.watcher.Current()
	if snap.Extensions == nil {
		return bus.ToolsCallReply{}, bus.Errorf(bus.CodeUnavailable, "no MCP configuration has been loaded yet")
	}
	// The catalog and personal connections are the caller's as sent: with
	// no user_id, no personal connection resolves.
	tool, err := s.resolver.resolve(ctx, req.UserID, req.Tool, snap.Generation)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	if tool.Deferred && !slices.Contains(req.Promoted, req.Tool) {
		return bus.ToolsCallReply{}, bus.Errorf(bus.CodeToolDeferred,
			"tool '%s' is deferred: its schema has not been loaded. Call tool_search first (for example with query \"select:%s\"), then call the tool again with the promoted list it returns.", req.Tool, req.Tool)
	}
	var (
		srv   *config.Server
		owner string // the caller for a personal connection, "" for a deployment server
	)
	if isPersonal(tool.Server) {
		// Only the caller's own connections: another user's runtime name,
		// or any with no user_id, is not_found.
		if srv, err = s.personalServer(ctx, req.UserID, tool.Server); err != nil {
			return bus.ToolsCallReply{}, err
		}
		owner = req.UserID
	} else {
		srv = snap.Extensions.Server(tool.Server)
		if srv == nil || !srv.Enabled {
			return bus.ToolsCallReply{}, bus.Errorf(bus.CodeNotFound, "tool '%s': MCP server '%s' is not configured or disabled", req.Tool, tool.Server)
		}
	}

	ts, role, isTaskTool := toolsetOf(srv, tool.OriginalName)
	if isTaskTool && role != tasks.RoleSubmit {
		return bus.ToolsCallReply{}, errInternalTaskTool(req.Tool)
	}
	if isTaskTool {
		if err := s.checkSubmitAdmission(thread); err != nil {
			return bus.ToolsCallReply{}, err
		}
	}

	ireq := &interceptors.Request{
		Server: srv.Name, Transport: srv.Type, Tool: tool.OriginalName, VisibleName: req.Tool, Arguments: req.Arguments,
		UserID: user, ThreadID: thread, RunID: req.RunID, ToolCallID: req.ToolCallID,
	}
	if req.Context != nil {
		ireq.Secrets = req.Context.Secrets
	}
	if srv.Type != config.TransportStdio {
		if err := checkStatic(srv); err != nil {
			return bus.ToolsCallReply{}, err
		}
		ireq.Headers = headers.Clone(srv.Headers)
	} else {
		ireq.Headers = map[string]string{}
	}
	chain := interceptors.Chain(s.chainFor(srv, snap.Extensions, owner), func(ctx context.Context, r *interceptors.Request) (*interceptors.Result, error) {
		return s.callUpstream(ctx, srv, r)
	})
	res, err := chain(ctx, ireq)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	if isTaskTool {
		return s.submitTask(ctx, srv, ts, ireq, res, chain, req)
	}
	return bus.ToolsCallReply{
		Tool: req.Tool, Server: srv.Name,
		Content: resultContent(res), StructuredContent: res.StructuredContent, IsError: res.IsError, Meta: res.Meta,
	}, nil
}

// resultContent is res's content blocks, never nil: a reply always carries
// a content array (an interceptor's short-circuit result may have none).
func resultContent(res *interceptors.Result) []json.RawMessage {
	if res.Content == nil {
		return []json.RawMessage{}
	}
	return res.Content
}

// internalReply is res as the reply of an internal or handed-over call.
func internalReply(res *interceptors.Result) bus.InternalCallReply {
	return bus.InternalCallReply{Content: resultContent(res), StructuredContent: res.StructuredContent, IsError: res.IsError, Meta: res.Meta}
}

// callUpstream is the end of every chain: one call on a pooled session.
// stdio sessions are per (server, user:thread) and get the headers that
// interceptors set as _meta.headers; HTTP/SSE sessions are per (server,
// fingerprint of the effective headers), connected with those headers, so
// callers with different credentials never share one. A failed or
// timed-out call closes its session so the next call starts clean; an
// HTTP session the upstream forgot gets one fresh initialize and one retry.
func (s *Service) callUpstream(ctx context.Context, srv *config.Server, r *interceptors.Request) (_ *interceptors.Result, err error) {
	ctx, span := tracing.Start(ctx, "tool call", tracing.Server(srv.Name), tracing.Tool(r.Tool), tracing.TransportKind(srv.Type))
	defer func() { bus.EndSpan(span, err) }()
	for _, name := range headers.Names(r.Headers) {
		if !headers.ValidName(name) {
			return nil, bus.Errorf(bus.CodeCredentialsInvalid, "MCP server '%s': '%s' is not a valid HTTP header name", srv.Name, name)
		}
		if reason := headers.Check(r.Headers[name]); reason != "" {
			return nil, bus.Errorf(bus.CodeCredentialsInvalid, "MCP server '%s' cannot send HTTP header '%s': its value %s", srv.Name, name, reason)
		}
	}
	var (
		p           *pool
		key         sessionKey
		connect     connectFunc
		callHeaders map[string]string
		owner       string
	)
	if isPersonal(srv.Name) {
		owner = r.UserID // the caller: handleCall routes only the caller's own connections
	}
	if srv.Type == config.TransportStdio {
		user, thread := r.UserID, r.ThreadID
		p, key, callHeaders = s.stdio, sessionKey{server: srv.Name, scope: user + ":" + thread, owner: owner, user: user}, r.Headers
		connect = func(ctx context.Context) (*mcpclient.Client, error) {
			spec, err := s.stdioLaunch(srv, owner, user, thread)
			if err != nil {
				return nil, err
			}
			return s.connect(ctx, srv, spec)
		}
	} else {
		h := headers.Clone(r.Headers)
		p, key = s.remote, sessionKey{server: srv.Name, scope: "h:" + headers.Fingerprint(h), owner: owner}
		connect = func(ctx context.Context) (*mcpclient.Client, error) {
			return s.connect(ctx, srv, mcpclient.Spec{Transport: srv.Type, URL: srv.URL, Headers: h})
		}
	}
	if srv.Type == config.TransportStdio {
		if owner, remote := s.remoteOwner(ctx, key); remote {
			if res, ok, err := s.handOver(ctx, owner, srv, key, r); ok {
				return res, err
			}
		}
	}
	timeout := s.callTimeout(srv, r.Tool)
	for attempt := 0; ; attempt++ {
		sess, err := p.get(ctx, key, srv.Fingerprint, connect)
		if err != nil {
			return nil, connectError(ctx, srv, err)
		}
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			callCtx, cancel = context.WithTimeout(ctx, timeout)
		}
		res, err := sess.client.CallTool(callCtx, r.Tool, r.Arguments, callHeaders)
		timedOut := callCtx.Err() != nil
		cancel()
		p.release(sess)
		if err == nil {
			return &interceptors.Result{Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError, Meta: res.Meta}, nil
		}
		if callerCancelled(ctx) {
			// The upstream was told (notifications/cancelled) and the
			// session stays: a stdio thread keeps its process and state.
			return nil, cancelledError(r.Tool)
		}
		p.drop(sess)
		if errors.Is(err, mcpclient.ErrSessionExpired) && attempt == 0 {
			s.log.InfoContext(ctx, "upstream forgot the session; initializing a new one and retrying once", observability.Server(srv.Name))
			continue
		}
		if timedOut || errors.Is(err, context.DeadlineExceeded) {
			limit := ""
			if timeout > 0 && ctx.Err() == nil {
				limit = fmt.Sprintf(" (tool_call_timeout %s)", timeout)
			}
			return nil, bus.Wrap(bus.CodeUpstreamTimeout, err, fmt.Sprintf("tool '%s' on MCP server '%s' timed out%s", r.Tool, srv.Name, limit))
		}
		err = bus.Redact(bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("tool '%s' on MCP server '%s' failed: %v", r.Tool, srv.Name, err)), srv.Redactor())
		s.log.WarnContext(ctx, "mcp tool call failed", observability.Server(srv.Name), observability.Tool(r.Tool), observability.Err(err))
		return nil, err
	}
}

// callTimeout is tool_call_timeout for stdio servers and for the tools of a
// task toolset; other HTTP/SSE tools ignore it (the seed: they use the
// transport's timeouts) and are bounded by the caller's deadline.
func (s *Service) callTimeout(srv *config.Server, raw string) time.Duration {
	if srv.ToolCallTimeout <= 0 || srv.Type == config.TransportStdio || isPersonal(srv.Name) {
		// A personal connection's (clamped) timeout bounds every call.
		return srv.ToolCallTimeout
	}
	for _, ts := range srv.TaskToolsets {
		if raw == ts.SubmitTool || raw == ts.StatusTool || raw == ts.CancelTool {
			return srv.ToolCallTimeout
		}
	}
	s.warnOnceFor("tct/"+srv.Name+"/"+srv.Fingerprint,
		"ignoring tool_call_timeout for an MCP server whose transport is not stdio; its calls are bounded by the caller's deadline",
		observability.Server(srv.Name), "transport", srv.Type)
	return 0
}

// connect opens a session with spec (its transport fields set by the
// caller) under the server's session_init_timeout. The deadline does not
// come from the caller (concurrent first callers share the connect) unless
// session_init_timeout is disabled.
func (s *Service) connect(callerCtx context.Context, srv *config.Server, spec mcpclient.Spec) (*mcpclient.Client, error) {
	ctx := callerCtx
	if srv.SessionInitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), srv.SessionInitTimeout)
		defer cancel()
	}
	spec.Server, spec.Logger, spec.Secrets = srv.Name, s.log, srv.SecretValues()
	spec.ClientName, spec.ClientVersion = "mcpbus-toolcall", "0.1.0"
	spec.MaxResponseBytes = s.cfg.Upstream.ResponseLimit(srv)
	if isPersonal(srv.Name) && srv.Type != config.TransportStdio {
		if err := s.egress.CheckURL(srv.URL); err != nil {
			return nil, bus.Wrap(bus.CodeConfigError, err, fmt.Sprintf("MCP server '%s': url %v", srv.Name, err))
		}
		spec.HTTPClient = s.egress.HTTPClient()
	}
	start := time.Now()
	c, err := mcpclient.Connect(ctx, spec)
	if err != nil && srv.SessionInitTimeout > 0 && ctx.Err() != nil {
		s.log.Warn("MCP session initialization timed out", observability.Server(srv.Name), "timeout", srv.SessionInitTimeout)
		return nil, bus.Wrap(bus.CodeInitTimeout, err, fmt.Sprintf("MCP server '%s' did not initialize within session_init_timeout (%s)", srv.Name, srv.SessionInitTimeout))
	}
	if err != nil {
		// The stderr tail is for operators: the log, never the caller.
		s.log.Warn("cannot open an MCP session", observability.Server(srv.Name), observability.Err(err), slog.String("stderr", mcpclient.StderrTail(err)))
	} else {
		s.log.Debug("mcp session opened", observability.Server(srv.Name), "pid", c.Pid(), "duration_ms", time.Since(start).Milliseconds())
	}
	return c, err
}

// connectError is the caller's error for a session that could not be
// opened, without a secret of srv (mcpclient errors never quote the stderr
// tail).
func connectError(ctx context.Context, srv *config.Server, err error) error {
	var be *bus.Error
	switch {
	case errors.As(err, &be):
	case ctx.Err() != nil:
		be = bus.Wrap(bus.CodeUpstreamTimeout, err, fmt.Sprintf("timed out waiting for a session with MCP server '%s'", srv.Name))
	default:
		be = bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("cannot connect to MCP server '%s': %v", srv.Name, err))
	}
	return bus.Redact(be, srv.Redactor())
}
