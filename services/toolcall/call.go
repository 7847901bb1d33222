package toolcall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// handleCall serves mcpbus.tools.call, the call pipeline's public entry
// (pipeline.go). Order: admission (nothing runs for a malformed request or
// a legacy metadata.auth_token), scope, the user's cap on calls in flight
// (inflight.go), progress and cancellation, guardrails on the visible
// name, resolution through the catalog, the server's cap on calls in
// flight, the server's own quotas (quotas.go), the server's interceptor chain (which adds the credentials), and
// the upstream call; a task toolset's submit then becomes a tracked task.
func (s *Service) handleCall(ctx context.Context, u *upcall) (bus.ToolsCallReply, error) {
	if err := admitCall(u.call); err != nil {
		return bus.ToolsCallReply{}, err
	}
	if u.call.VirtualServer == "" && s.virtual.live.Registry().Len() == 0 {
		return s.callCatalog(ctx, u)
	}
	visible := u.call.Tool
	req, release, err := s.enterSet(ctx, u.call, u.note)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	defer release()
	u.call = req
	reply, err := s.callCatalog(ctx, u)
	if req.VirtualServer != "" {
		reply.Tool = visible
	}
	return reply, err
}

// callCatalog is handleCall on a name of the whole catalog (after the
// virtual server step).
func (s *Service) callCatalog(ctx context.Context, u *upcall) (_ bus.ToolsCallReply, err error) {
	req := u.call
	sc := bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}
	if err := checkScope(sc); err != nil {
		return bus.ToolsCallReply{}, err
	}
	if err := s.admitInFlight(s.userCalls, limitUser, sc.User()); err != nil {
		return bus.ToolsCallReply{}, err
	}
	defer s.userCalls.Release(sc.User())
	_, u.userBound = bus.BoundUser(ctx) // then req.UserID is the subject's user (bus.BindUser)
	ctx, untrack, err := s.followCall(ctx, u)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	defer untrack()
	if err := s.withAsker(ctx, u); err != nil {
		return bus.ToolsCallReply{}, err
	}
	// Cancelled at any step (resolution, credentials, the hand-over, the
	// upstream call): the reply says so.
	cancelled := ctx
	defer func() {
		if err != nil && callerCancelled(cancelled) {
			err = cancelledError(req.Tool)
		}
	}()
	ctx, cancel := withTimeoutMS(ctx, req.TimeoutMS)
	defer cancel()
	if err := s.guard.Check(ctx, bus.GuardrailRequest{
		Tool: req.Tool, Arguments: req.Arguments, UserID: sc.User(), ThreadID: sc.Thread(), RunID: req.RunID, ToolCallID: req.ToolCallID,
	}); err != nil {
		return bus.ToolsCallReply{}, err
	}

	ext, gen, err := s.snapshot()
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	t, tool, err := s.resolveTool(ctx, req, ext, gen)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	u.note.server(t)
	if err := s.admitInFlight(s.serverCalls, limitServer, t.srv.Name); err != nil {
		return bus.ToolsCallReply{}, err
	}
	defer s.serverCalls.Release(t.srv.Name)
	if len(t.srv.Quotas) > 0 {
		releaseQuotas, err := s.admitServerQuotas(ctx, t, u.note)
		if err != nil {
			return bus.ToolsCallReply{}, err
		}
		defer releaseQuotas()
	}
	// A 2026-07-28 upstream over HTTP gets the x-mcp-header annotated
	// arguments as Mcp-Param-* headers too.
	u.opts.InputSchema = tool.InputSchema
	ts, role, isTaskTool := toolsetOf(t.srv, tool.OriginalName)
	if isTaskTool && role != tasks.RoleSubmit {
		return bus.ToolsCallReply{}, errInternalTaskTool(req.Tool)
	}
	native, err := nativeTaskOp(tool, isTaskTool, req)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	if isTaskTool || native != nil {
		if err := s.checkSubmitAdmission(sc.Thread()); err != nil {
			return bus.ToolsCallReply{}, err
		}
	}
	u.native = native

	ireq, err := assemble(t, sc, tool.OriginalName, req.Tool, req.Arguments)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	ireq.RunID, ireq.ToolCallID = req.RunID, req.ToolCallID
	if req.Context != nil {
		ireq.Secrets = req.Context.Secrets
	}
	chain := s.handler(t, ext, chainCall)
	res, err := chain.run(ctx, u, ireq)
	if err != nil {
		return bus.ToolsCallReply{}, err
	}
	if isTaskTool {
		return s.submitTask(ctx, t.srv, ts, ireq, res, chain, req)
	}
	if native != nil {
		return s.submitNative(ctx, t, tool, ireq, u, res, chain)
	}
	return plainReply(u, t, res), nil
}

// plainReply is the reply of a call answered with the tool's result (or
// its multi-round-trip input_required, bridged).
func plainReply(u *upcall, t target, res *interceptors.Result) bus.ToolsCallReply {
	return bus.ToolsCallReply{
		Tool: u.call.Tool, Server: t.srv.Name,
		Content: rewriteBlocks(t, resultContent(res)), StructuredContent: res.StructuredContent, IsError: res.IsError, Meta: res.Meta,
		InputRequired: u.required,
	}
}

// admitCall refuses a public call before anything runs: no tool, a legacy
// metadata.auth_token, or arguments that are not a JSON object.
func admitCall(req bus.Call) error {
	if req.Tool == "" {
		return bus.Errorf(bus.CodeInvalidRequest, "tool is required")
	}
	if err := req.RejectAuthToken(); err != nil {
		return err
	}
	if err := admitBridge(req); err != nil {
		return err
	}
	return bus.CheckArguments(req.Arguments)
}

// callTimeout is tool_call_timeout for stdio servers and for the tools of a
// task toolset; other HTTP/SSE tools ignore it (the seed: they use the
// transport's timeouts) and are bounded by the caller's deadline.
func (s *Service) callTimeout(t target, raw string) time.Duration {
	srv := t.srv
	if srv.ToolCallTimeout <= 0 || srv.Type == config.TransportStdio || t.personal() {
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

// connect opens a session of t with spec (its transport fields set by the
// caller) under the server's session_init_timeout. The deadline does not
// come from the caller (concurrent first callers share the connect) unless
// session_init_timeout is disabled. A personal HTTP/SSE connection goes
// through the egress guard.
func (s *Service) connect(callerCtx context.Context, t target, spec mcpclient.Spec) (*mcpclient.Client, error) {
	srv := t.srv
	ctx := callerCtx
	if srv.SessionInitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), srv.SessionInitTimeout)
		defer cancel()
	}
	spec.Server, spec.Logger, spec.Secrets = srv.Name, s.log, srv.SecretValues()
	spec.ClientName, spec.ClientVersion = "mcpbus-toolcall", "0.1.0"
	spec.MaxResponseBytes = s.cfg.Upstream.ResponseLimit(srv)
	if t.personal() && srv.Type != config.TransportStdio {
		if err := s.egress.CheckURL(srv.URL); err != nil {
			return nil, bus.Wrap(bus.CodeConfigError, err, fmt.Sprintf("MCP server '%s': url %v", srv.Name, err))
		}
		spec.HTTPClient = s.egress.HTTPClient()
	}
	spec.FollowRedirects = srv.FollowRedirects
	spec.OnListChanged = s.onListChanged(srv.Name, t.owner)
	if srv.FollowRedirects && spec.HTTPClient == nil {
		// A deployment server that follows redirects: every hop passes
		// the egress policy's URL check.
		spec.HTTPClient = mcpclient.SharedHTTPClient()
		spec.HTTPClient.CheckRedirect = s.egress.CheckRedirect
	}
	if spec.Era == "" {
		// Discovery's era for the server: no probe of our own to start.
		// (A session of a fixed era, a subscription's, leaves the cache
		// alone.)
		spec.Eras = s.deps.Eras
		s.deps.Eras.Seed(spec, t.era)
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
