package toolcall

import (
	"context"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
)

// handleInternalCall serves mcpbus.internal.call: the task poller's status
// and cancel calls of a server's raw tool, with background credentials
// only. The chain is the server's without headers_from_context (there are
// no request secrets after the agent's run), guardrails are not consulted
// (the agent's submit was), and the session is the owner's thread's.
func (s *Service) handleInternalCall(ctx context.Context, req bus.InternalCallRequest) (bus.InternalCallReply, error) {
	if req.Server == "" || req.Tool == "" {
		return bus.InternalCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "server and tool are required")
	}
	user, thread, err := scopeIDs(bus.ToolsCallRequest{UserID: req.UserID, ThreadID: req.ThreadID})
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	snap := s.watcher.Current()
	if snap.Extensions == nil {
		return bus.InternalCallReply{}, bus.Errorf(bus.CodeUnavailable, "no MCP configuration has been loaded yet")
	}
	var (
		srv   *config.Server
		owner string
	)
	if isPersonal(req.Server) {
		// The task owner's own connection. One edited, disabled or deleted
		// since the submit can never be resolved again (its runtime name
		// derives from the definition): the task fails permanently. An api
		// that cannot be reached is unavailable, retried by the poller.
		srv, err = s.personalServer(ctx, req.UserID, req.Server)
		if err != nil {
			if be := bus.AsError(err); be.Code == bus.CodeNotFound {
				return bus.InternalCallReply{}, bus.PermanentCallError(be.Message)
			}
			return bus.InternalCallReply{}, err
		}
		owner = req.UserID
	} else {
		srv = snap.Extensions.Server(req.Server)
		if srv == nil || !srv.Enabled {
			return bus.InternalCallReply{}, bus.PermanentCallError("MCP server '" + req.Server + "' is no longer configured or is disabled")
		}
	}
	ireq := &interceptors.Request{
		Server: srv.Name, Transport: srv.Type, Tool: req.Tool, VisibleName: req.Tool,
		Arguments: req.Arguments, Headers: map[string]string{}, UserID: user, ThreadID: thread,
	}
	if srv.Type != config.TransportStdio {
		if err := checkStatic(srv); err != nil {
			return bus.InternalCallReply{}, err
		}
		ireq.Headers = headers.Clone(srv.Headers)
	}
	var ins []interceptors.Named
	for _, in := range s.chainFor(srv, snap.Extensions, owner) {
		if in.Name != nameHeadersFromContext {
			ins = append(ins, in)
		}
	}
	res, err := interceptors.Chain(ins, func(ctx context.Context, r *interceptors.Request) (*interceptors.Result, error) {
		return s.callUpstream(ctx, srv, r)
	})(ctx, ireq)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	return internalReply(res), nil
}
