package toolcall

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// handleInternalCall serves mcpbus.internal.call, the call pipeline's
// background entry (pipeline.go): the task poller's status and cancel
// calls of a server's raw tool, with background credentials only. The
// chain is the server's without headers_from_context (there are no request
// secrets after the agent's run), guardrails are not consulted (the
// agent's submit was), and the session is the owner's thread's.
func (s *Service) handleInternalCall(ctx context.Context, req bus.InternalCallRequest) (bus.InternalCallReply, error) {
	if req.Server == "" || req.Tool == "" {
		return bus.InternalCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "server and tool are required")
	}
	if req.Context != nil {
		// A background call has no request secrets (the agent's run is
		// over): one that carries some is a caller's mistake.
		return bus.InternalCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "context: an internal call carries no request secrets")
	}
	sc := bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID}
	if err := checkScope(sc); err != nil {
		return bus.InternalCallReply{}, err
	}
	op, err := internalNativeOp(req)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	// The task poller's call is a Call like every other entry's; of its
	// fields, only the ones a background call has are read.
	u := newUpcall(bus.Call{Tool: req.Tool, Arguments: req.Arguments, UserID: req.UserID, ThreadID: req.ThreadID, TimeoutMS: req.TimeoutMS})
	u.native = op
	ctx, cancel := withTimeoutMS(ctx, req.TimeoutMS)
	defer cancel()
	ext, _, err := s.snapshot()
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	t, err := s.resolveTaskServer(ctx, req, ext)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	ireq, err := assemble(t, sc, req.Tool, req.Tool, req.Arguments)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	res, err := s.handler(t, ext, chainBackground).run(ctx, u, ireq)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	return nativeReply(u, res), nil
}
