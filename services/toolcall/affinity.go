package toolcall

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Stdio sessions follow their thread across replicas. A stdio session is
// per (server, user:thread) and keeps state in its process, but
// mcpbus.tools.call reaches any replica (a NATS queue group). So every
// stdio session has one owner among the live toolcall replicas
// (pkg/presence: heartbeats and rendezvous hashing over the session key),
// and a replica that receives a call for a session it does not own hands
// the upstream call, after guardrails, resolution and interceptors, to the
// owner on the owner's own subject. HTTP/SSE sessions have no such state
// and are used where the call lands.
//
// When the owner cannot be reached (it died and its heartbeats have not
// expired yet) the receiving replica makes the call itself, so a thread
// may briefly have a process on two replicas; when the set of replicas
// changes, each replica retires the stdio sessions it no longer owns (no
// new calls; closed once the calls in flight on them have returned).

// presenceGroup is the toolcall replicas' presence group.
const presenceGroup = "toolcall"

// stdioSubject is a replica's subject for the stdio calls it owns
// (bus.Handler semantics: deadline in Mcpbus-Timeout-Ms, errors as bus
// errors). Body: stdioCallRequest; reply: bus.InternalCallReply (the
// upstream's result).
func stdioSubject(names bus.Names, replica string) string {
	return names.Internal("toolcall.stdio." + replica)
}

// stdioCallRequest is one upstream call handed to the owner of its
// session: the call's bus.Call as the receiving replica had it after the
// interceptor chain (upcall.forwarded: the chain's arguments and scope; no
// request secrets or run metadata), and what resolution and the chain
// decided there.
type stdioCallRequest struct {
	Call bus.Call `json:"call"`
	// Server is the resolved server; Owner the user of a personal
	// connection, "" for a deployment server.
	Server string `json:"server"`
	Owner  string `json:"owner,omitempty"`
	// RawTool is the server's own name of the tool (Call.Tool is the
	// visible one).
	RawTool string            `json:"raw_tool"`
	Headers map[string]string `json:"headers,omitempty"` // set by the chain
	// UserBound says the call came in on its user's per-user subject, so
	// its inboxes are under the user's own NATS inbox prefix
	// (bus.CheckInbox).
	UserBound bool `json:"user_bound,omitempty"`
	// Native is a native task request (native.go), Fed a federation
	// request (federation.go); the reply then carries its Result or
	// RPCError.
	Native *nativeOp `json:"native,omitempty"`
	Fed    *fedOp    `json:"fed,omitempty"`

	// flatHandOver is the previous release's body, written next to Call
	// for one release so that an owner not yet upgraded understands a
	// hand-over (docs/nats-contract.md "Hand-over body"); an owner of
	// this release reads it only from a body without raw_tool.
	flatHandOver
}

// flatHandOver holds the fields of the previous release's hand-over body
// that this one moved into Call (the others, server, owner, headers,
// user_bound, native and fed, kept their names and meaning). They are all
// copies of Call fields the hand-over already forwards: no request
// secret, run metadata or config, which neither body carries.
//
// Remove in the release after next (contract step: once no replica of the
// previous release can be running).
type flatHandOver struct {
	Tool               string                  `json:"tool,omitempty"` // the raw tool name
	Arguments          json.RawMessage         `json:"arguments,omitempty"`
	UserID             string                  `json:"user_id,omitempty"`
	ThreadID           string                  `json:"thread_id,omitempty"`
	CallID             string                  `json:"call_id,omitempty"`
	ProgressInbox      string                  `json:"progress_inbox,omitempty"`
	LogLevel           string                  `json:"log_level,omitempty"`
	ClientCapabilities *bus.ClientCapabilities `json:"client_capabilities,omitempty"`
	Input              *bus.CallInput          `json:"input,omitempty"`
	AskInbox           string                  `json:"ask_inbox,omitempty"`
}

// handOverBody is the body handOver sends: the forwarded call, and the
// same call in the previous release's flat fields (expand step).
func handOverBody(c bus.Call, t target, r *interceptors.Request, u *upcall) stdioCallRequest {
	return stdioCallRequest{
		Call: c, Server: t.srv.Name, Owner: t.owner, RawTool: r.Tool, Headers: r.Headers,
		UserBound: u.userBound, Native: u.native, Fed: u.fed,
		flatHandOver: flatHandOver{
			Tool: r.Tool, Arguments: c.Arguments, UserID: c.UserID, ThreadID: c.ThreadID,
			CallID: c.CallID, ProgressInbox: c.ProgressInbox, LogLevel: c.LogLevel,
			ClientCapabilities: c.ClientCapabilities, Input: c.Input, AskInbox: c.AskInbox,
		},
	}
}

// upgrade turns a body of the previous release (no raw_tool, the call in
// flat fields) into this release's shape; a body of this release is left
// as it is, its Call authoritative. The previous body named only the raw
// tool, so it is the call's tool too.
func (req *stdioCallRequest) upgrade() {
	if req.RawTool != "" {
		return
	}
	f := req.flatHandOver
	req.RawTool = f.Tool
	req.Call = bus.Call{
		Tool: f.Tool, Arguments: f.Arguments, UserID: f.UserID, ThreadID: f.ThreadID,
		CallID: f.CallID, ProgressInbox: f.ProgressInbox, LogLevel: f.LogLevel,
		ClientCapabilities: f.ClientCapabilities, Input: f.Input, AskInbox: f.AskInbox,
	}
}

// affinityKey is what decides a stdio session's owner.
func (k sessionKey) affinityKey() string { return k.server + "\x00" + k.owner + "\x00" + k.scope }

// remoteOwner returns the replica that owns key when it is another one. A
// call handed over never asks: it enters the pipeline after the route step
// (handleStdioCall), so there is no second hop.
func (s *Service) remoteOwner(key sessionKey) (string, bool) {
	owner := s.presence.Owner(key.affinityKey())
	return owner, owner != s.presence.Self()
}

// errOwnerGone ends a hand-over whose owner stopped being live.
var errOwnerGone = errors.New("the owning replica is gone")

// handOver sends a stdio call to its owner. ok is false when the owner
// did not answer (gone): the caller then makes the call itself.
func (s *Service) handOver(ctx context.Context, owner string, u *upcall, t target, r *interceptors.Request) (res *interceptors.Result, ok bool, err error) {
	srv := t.srv
	// NATS request-reply cannot tell a request that the owner took down
	// with it (SIGKILL, a lost node) from a slow call: without this the
	// caller would wait for its whole deadline. The owner found gone
	// (heartbeats expired) ends the wait with a clean unavailable.
	gone := s.presence.GoneCh(owner)
	select {
	case <-gone:
		return nil, false, nil // gone before we asked: the call is made here
	default:
	}
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-gone:
			cancel(errOwnerGone)
		case <-hctx.Done():
		}
	}()
	reply, err := bus.Request[bus.InternalCallReply](hctx, s.deps.NC, stdioSubject(s.deps.Names, owner), handOverBody(u.forwarded(r), t, r, u))
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(hctx), errOwnerGone) {
		s.log.Warn("the replica that owned this stdio session stopped during the call",
			observability.Server(srv.Name), "owner", owner)
		return nil, true, bus.Errorf(bus.CodeUnavailable,
			"tool '%s' on MCP server '%s': the mcpbus replica running this thread's session stopped during the call; call again", r.Tool, srv.Name)
	}
	var be *bus.Error
	if errors.As(err, &be) && be.Code == bus.CodeUnavailable && ctx.Err() == nil {
		// Gone at once: the next calls for its sessions are made here
		// without asking it first, until it beats again.
		s.log.Warn("the replica that owns this stdio session does not answer; calling from here",
			observability.Server(srv.Name), "owner", owner, observability.Err(err))
		s.presence.Gone(owner)
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	handOverNative(u, reply)
	u.required = reply.InputRequired
	return &interceptors.Result{Content: reply.Content, StructuredContent: reply.StructuredContent, IsError: reply.IsError, Meta: reply.Meta}, true, nil
}

// handleStdioCall serves a stdio call another replica handed over, the
// call pipeline's hand-over entry (pipeline.go): the server is resolved
// here and the call made on this replica's pool (the chain ran on the
// replica that received the call).
func (s *Service) handleStdioCall(ctx context.Context, req stdioCallRequest) (_ bus.InternalCallReply, err error) {
	req.upgrade()
	u := &upcall{call: req.Call, userBound: req.UserBound, note: &callNote{}, native: req.Native, fed: req.Fed}
	ctx, untrack, err := s.followCall(ctx, u)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	defer untrack()
	cancelled := ctx
	defer func() {
		if err != nil && callerCancelled(cancelled) {
			err = cancelledError(req.RawTool)
		}
	}()
	t, err := s.resolveHandedOver(ctx, req)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	r := &interceptors.Request{
		Server: t.srv.Name, Transport: t.srv.Type, Tool: req.RawTool, Arguments: req.Call.Arguments,
		Headers: req.Headers, UserID: req.Call.UserID, ThreadID: req.Call.ThreadID,
	}
	if r.Headers == nil {
		r.Headers = map[string]string{}
	}
	if err = s.withAsker(ctx, u); err != nil {
		return bus.InternalCallReply{}, err
	}
	res, err := s.invoke(ctx, u, t, s.routeFor(t, r), r)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	reply := nativeReply(u, res)
	reply.InputRequired = u.required
	return reply, nil
}

// closeUnowned retires the stdio sessions another replica now owns (the
// set of replicas changed): they take no new calls and are closed once the
// calls in flight on them have returned.
func (s *Service) closeUnowned() {
	n := s.stdio.retireWhere(func(k sessionKey) bool {
		return s.presence.Owner(k.affinityKey()) != s.presence.Self()
	})
	if n > 0 {
		s.log.Info("replicas changed; closing the stdio sessions another replica now owns once their calls return", "sessions", n)
	}
}
