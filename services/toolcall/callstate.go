package toolcall

import (
	"context"
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// upcall is one call on its way upstream on this replica: the bus.Call its
// entry point built (for a task poll or a federation request, the fields
// it has) and what the steps add to it or learn from the upstream. Every
// step takes it as a parameter, from the entry point to the upstream
// client (mcpclient.CallOptions): nothing of a call travels in context
// values, which carry only cancellation, the deadline and the trace. A
// hand-over forwards its Call (handOver), and the owner builds its own
// upcall from it.
type upcall struct {
	call bus.Call
	// userBound says the call came in on its user's per-user subject
	// (bus.BindUser): its inboxes must be under the user's own prefix.
	userBound bool
	// note is what the observing wrapper reads once the call returned
	// (observe.go); never nil.
	note *callNote
	// native and fed select what the invoke step sends instead of a plain
	// tools/call (native.go, federation.go); the step stores the
	// upstream's answer in them.
	native *nativeOp
	fed    *fedOp
	// opts is what the upstream client call carries besides name and
	// arguments: the tool's schema, progress, log messages, the owner, the
	// legacy server's requests (followCall, withAsker); invoke adds the
	// bridged input and the headers.
	opts mcpclient.CallOptions
	// required is a modern upstream's input_required answer (bridge.go).
	required *bus.InputRequired
}

// newUpcall is the upcall of c, with a fresh note.
func newUpcall(c bus.Call) *upcall { return &upcall{call: c, note: &callNote{}} }

// bridged reports a call that carries something to bridge between eras
// (a caller with an MCP client).
func (u *upcall) bridged() bool {
	return u.call.ClientCapabilities != nil || u.call.Input != nil || u.call.AskInbox != ""
}

// callChain is a server's interceptor chain (handler): the chain sees the
// interceptors.Request, and the upstream step at its end the call's
// upcall.
type callChain struct {
	s   *Service
	t   target
	ins []interceptors.Named
}

// run runs the chain for one call.
func (c callChain) run(ctx context.Context, u *upcall, r *interceptors.Request) (*interceptors.Result, error) {
	if len(c.ins) == 0 {
		return c.end(ctx, u, r)
	}
	return interceptors.Chain(c.ins, func(ctx context.Context, r *interceptors.Request) (*interceptors.Result, error) {
		return c.end(ctx, u, r)
	})(ctx, r)
}

// end is the chain's last step: the upstream call, its result and error
// redacted (redact.go).
func (c callChain) end(ctx context.Context, u *upcall, r *interceptors.Request) (*interceptors.Result, error) {
	res, err := c.s.upstream(ctx, u, c.t, r)
	return redactResult(u, resultRedactor(c.t.srv, r), res, err)
}

// forwarded is the Call a hand-over sends for u after the chain ran with
// r: the chain's arguments and scope, without the request secrets and run
// metadata (the chain has used them; they never leave this replica).
func (u *upcall) forwarded(r *interceptors.Request) bus.Call {
	c := u.call
	c.Context, c.Metadata, c.Config = nil, nil, nil
	c.Arguments = json.RawMessage(r.Arguments)
	c.UserID, c.ThreadID = r.UserID, r.ThreadID
	return c
}
