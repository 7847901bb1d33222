package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/headers"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// The call pipeline. Every entry point runs the same steps, one function
// each, in this order:
//
//	resolve   the server of the call, and whose it is          resolveTool, resolveTaskServer, resolveHandedOver
//	scope     the (user, thread) of the call, checked          checkScope
//	assemble  the request the chain sees, starting headers     assemble
//	chain     the server's interceptors (credentials)          handler
//	route     the pool and session, or the owning replica      routeFor, upstream (handOver, affinity.go)
//	invoke    the call on a pooled session, one retry on a     invoke
//	          session the upstream forgot
//	errors    the caller's error for a failed call             callError, connectError
//
// handleCall (mcpbus.tools.call: agents over NATS, the REST API and the MCP
// endpoint, whose progress and cancellation followCall registers) runs them
// all; handleInternalCall (the task poller's background calls) runs them
// with the background chain; handleStdioCall (a stdio call another replica
// handed over, its chain already run there) resolves and enters at invoke.
//
// Headers are checked once, where they are assembled: the static headers in
// assemble, and each value a credential source sets by that source (its
// error names the source). Nothing after the chain checks them again.

// target is a resolved server: its config and, for a personal connection,
// the user who owns it. owner comes from where the server was found (the
// caller's personal connections, read from the api's store), never from the
// server's name: a deployment server named like a runtime name is a
// deployment server.
type target struct {
	srv   *config.Server
	owner string // "" for a deployment server
	// era is the MCP era discovery last spoke to the server in (the
	// catalog entry's server_era), seeded into the era cache before a
	// connection is opened; "" when unknown (a background call).
	era mcpclient.Era
}

// personal reports a personal connection.
func (t target) personal() bool { return t.owner != "" }

// snapshot is the deployment config calls resolve against, or unavailable
// before one has been loaded.
func (s *Service) snapshot() (ext *config.Extensions, gen int64, err error) {
	snap := s.watcher.Current()
	if snap.Extensions == nil {
		return nil, 0, bus.Errorf(bus.CodeUnavailable, "no MCP configuration has been loaded yet")
	}
	return snap.Extensions, snap.Generation, nil
}

// resolveTool is the resolve step of a public call: the caller's catalog
// entry for the visible name (personal connections are the caller's as
// sent: with no user_id, none resolves), then its server: the caller's own
// personal connection when the catalog says the tool is one, else the
// deployment server.
func (s *Service) resolveTool(ctx context.Context, req bus.Call, ext *config.Extensions, gen int64) (target, bus.Tool, error) {
	var tool bus.Tool
	var err error
	if req.Digest == "" {
		tool, err = s.resolver.resolve(ctx, req.UserID, req.Tool, gen)
	} else {
		// A digest is checked against discovery's catalog, not a cached
		// one a catalog event has not reached yet (either way round).
		tool, err = s.resolver.fresh(ctx, req.UserID, req.Tool)
	}
	if err != nil {
		return target{}, bus.Tool{}, err
	}
	if req.Digest == "" && len(req.SessionDigest) >= bus.MinSessionDigest && !strings.HasPrefix(tool.Digest, req.SessionDigest) {
		return target{}, bus.Tool{}, &bus.Error{Code: bus.CodeToolChanged,
			Message: fmt.Sprintf("tool '%s' changed since this MCP session listed it (listed digest %s…, now %s); list the tools again before calling it", req.Tool, req.SessionDigest, short(tool.Digest)),
			Details: map[string]any{"tool": req.Tool, "listed_digest": req.SessionDigest, "digest": tool.Digest}}
	}
	if req.Digest != "" {
		if req.Digest != tool.Digest {
			return target{}, bus.Tool{}, &bus.Error{Code: bus.CodeToolChanged,
				Message: fmt.Sprintf("tool '%s' changed since it was listed (listed digest %s, now %s); list the tools again before calling it", req.Tool, short(req.Digest), short(tool.Digest)),
				Details: map[string]any{"tool": req.Tool, "listed_digest": req.Digest, "digest": tool.Digest}}
		}
	}
	if tool.Deferred && !slices.Contains(req.Promoted, req.Tool) {
		return target{}, bus.Tool{}, bus.Errorf(bus.CodeToolDeferred,
			"tool '%s' is deferred: its schema has not been loaded. Call tool_search first (for example with query \"select:%s\"), then call the tool again with the promoted list it returns.", req.Tool, req.Tool)
	}
	if tool.Personal {
		// Only the caller's own connections: another user's runtime
		// name, or any with no user_id, is not_found.
		t, err := s.personalTarget(ctx, req.UserID, tool.Server)
		t.era = mcpclient.Era(tool.ServerEra)
		return t, tool, err
	}
	srv := ext.Server(tool.Server)
	if srv == nil || !srv.Enabled {
		return target{}, bus.Tool{}, bus.Errorf(bus.CodeNotFound, "tool '%s': MCP server '%s' is not configured or disabled", req.Tool, tool.Server)
	}
	return target{srv: srv, era: mcpclient.Era(tool.ServerEra)}, tool, nil
}

// short is a digest's first 12 characters, for messages.
func short(digest string) string { return digest[:min(len(digest), 12)] }

// resolveTaskServer is the resolve step of a background call: the task's
// server, a deployment server when the deployment config has one of that
// name, else the task owner's own personal connection. One deleted,
// disabled or (for a personal connection, whose runtime name derives from
// its definition) edited since the submit can never be resolved again: the
// task fails permanently. An api that cannot be reached is unavailable,
// retried by the poller. A name that no personal connection can have (not
// p_ + 12 hex digits) is not looked up there.
func (s *Service) resolveTaskServer(ctx context.Context, req bus.InternalCallRequest, ext *config.Extensions) (target, error) {
	srv := ext.Server(req.Server)
	if srv == nil && bus.PersonalRuntimeNamePattern.MatchString(req.Server) {
		t, err := s.personalTarget(ctx, req.UserID, req.Server)
		if be := bus.AsError(err); err != nil && be.Code == bus.CodeNotFound {
			return target{}, bus.PermanentCallError(be.Message)
		}
		return t, err
	}
	if srv == nil || !srv.Enabled {
		return target{}, bus.PermanentCallError("MCP server '" + req.Server + "' is no longer configured or is disabled")
	}
	return target{srv: srv}, nil
}

// resolveHandedOver is the resolve step of a stdio call another replica
// handed over: the server is looked up here (this replica's config, or the
// personal connection of req.Owner) and must be a stdio server (any server
// for a native task or subscription request).
func (s *Service) resolveHandedOver(ctx context.Context, req stdioCallRequest) (target, error) {
	var t target
	if req.Owner != "" {
		var err error
		if t, err = s.personalTarget(ctx, req.Owner, req.Server); err != nil {
			return target{}, err
		}
	} else {
		srv := serverOf(s.watcher.Current().Extensions, req.Server)
		if srv == nil || !srv.Enabled {
			return target{}, bus.Errorf(bus.CodeNotFound, "MCP server '%s' is not configured or disabled", req.Server)
		}
		t = target{srv: srv}
	}
	if t.srv.Type != config.TransportStdio && req.Native == nil && (req.Fed == nil || req.Fed.Subscription == nil) {
		return target{}, bus.Errorf(bus.CodeInvalidRequest, "MCP server '%s' is not a stdio server", req.Server)
	}
	return t, nil
}

// personalTarget is user's own enabled personal connection named runtime.
func (s *Service) personalTarget(ctx context.Context, user, runtime string) (target, error) {
	srv, err := s.personalServer(ctx, user, runtime)
	if err != nil {
		return target{}, err
	}
	return target{srv: srv, owner: user}, nil
}

// checkScope is the scope step: both ids, defaults applied, must be able to
// name a workspace directory.
func checkScope(sc bus.Scope) error {
	if !validScopePart(sc.User()) {
		return bus.Errorf(bus.CodeInvalidRequest, "user_id has characters that are not allowed")
	}
	if !validScopePart(sc.Thread()) {
		return bus.Errorf(bus.CodeInvalidRequest, "thread_id has characters that are not allowed")
	}
	return nil
}

// withTimeoutMS bounds ctx by a request's timeout_ms (none when <= 0).
func withTimeoutMS(ctx context.Context, ms int64) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// assemble is the assemble step: the request the interceptor chain sees,
// for the raw tool of t in scope sc, starting from the server's static
// headers (checked here, once) for HTTP/SSE and from none for stdio.
func assemble(t target, sc bus.Scope, raw, visible string, args json.RawMessage) (*interceptors.Request, error) {
	r := &interceptors.Request{
		Server: t.srv.Name, Transport: t.srv.Type, Tool: raw, VisibleName: visible, Arguments: args,
		UserID: sc.User(), ThreadID: sc.Thread(), Headers: map[string]string{},
	}
	if t.srv.Type != config.TransportStdio {
		if err := checkStatic(t.srv); err != nil {
			return nil, err
		}
		r.Headers = headers.Clone(t.srv.Headers)
	}
	return r, nil
}

// chainKind selects the interceptors a call runs.
type chainKind int

const (
	// chainCall is every interceptor of the server.
	chainCall chainKind = iota
	// chainBackground leaves out headers_from_context: a background call
	// has no request secrets (the agent's run is over).
	chainBackground
)

// handler is the chain step: t's interceptors (chainFor's order) ending in
// the upstream call, whose result and error are redacted (redact.go).
func (s *Service) handler(t target, ext *config.Extensions, kind chainKind) callChain {
	ins := s.chainFor(t.srv, ext, t.owner)
	if kind == chainBackground {
		ins = slices.DeleteFunc(slices.Clone(ins), func(in interceptors.Named) bool { return in.Name == nameHeadersFromContext })
	}
	return callChain{s: s, t: t, ins: ins}
}

// route is where a call goes upstream: the pool and session key, how to
// open the session, and the headers sent with each call (stdio sessions
// get them as _meta.headers; HTTP/SSE sessions are opened with them).
type route struct {
	pool *pool
	key  sessionKey
	// spec is the session's transport (connect opens it).
	spec        func() (mcpclient.Spec, error)
	connect     connectFunc
	callHeaders map[string]string
}

// routeFor is the route step: stdio sessions are per (server, user:thread);
// HTTP/SSE sessions are per (server, fingerprint of the effective
// headers), so callers with different credentials never share one.
func (s *Service) routeFor(t target, r *interceptors.Request) route {
	srv := t.srv
	if srv.Type == config.TransportStdio {
		user, thread := r.UserID, r.ThreadID
		key := sessionKey{server: srv.Name, scope: bus.Scope{UserID: user, ThreadID: thread}.Key(), owner: t.owner, user: user}
		spec := func() (mcpclient.Spec, error) {
			sp, err := s.stdioLaunch(srv, t.owner, user, thread)
			// A legacy stdio session carries the thread's resource
			// subscriptions itself (subscriptions.go).
			sp.OnResourceUpdated = s.onResourceUpdated(key)
			return sp, err
		}
		return route{
			pool:        s.stdio,
			key:         key,
			callHeaders: r.Headers,
			spec:        spec,
			connect:     s.connectWith(t, spec),
		}
	}
	h := headers.Clone(r.Headers)
	key := sessionKey{server: srv.Name, scope: "h:" + headers.Fingerprint(h), owner: t.owner}
	spec := func() (mcpclient.Spec, error) {
		// A 2025-11-25 session carries its callers' resource
		// subscriptions (subscriptions.go): its GET stream opens when
		// the server declared resources.subscribe.
		return mcpclient.Spec{Transport: srv.Type, URL: srv.URL, Headers: h, OnResourceUpdated: s.onResourceUpdated(key)}, nil
	}
	return route{
		pool:    s.remote,
		key:     key,
		spec:    spec,
		connect: s.connectWith(t, spec),
	}
}

// connectWith opens a session of t with the spec spec returns.
func (s *Service) connectWith(t target, spec func() (mcpclient.Spec, error)) connectFunc {
	return func(ctx context.Context) (*mcpclient.Client, error) {
		sp, err := spec()
		if err != nil {
			return nil, err
		}
		return s.connect(ctx, t, sp)
	}
}

// upstream is the end of every chain: the route, then the call here or,
// for a stdio session another live replica owns, on that replica.
func (s *Service) upstream(ctx context.Context, u *upcall, t target, r *interceptors.Request) (_ *interceptors.Result, err error) {
	ctx, span := tracing.Start(ctx, "tool call", tracing.Server(t.srv.Name), tracing.Tool(r.Tool), tracing.TransportKind(t.srv.Type))
	defer func() { bus.EndSpan(span, err) }()
	rt := s.routeFor(t, r)
	if t.srv.Type == config.TransportStdio || u.native != nil || u.subscription() {
		// A native task request, and a subscription, follow their
		// session's owner also over HTTP/SSE (native.go, subscriptions).
		if owner, remote := s.remoteOwner(rt.key); remote {
			if res, ok, err := s.handOver(ctx, owner, u, t, r); ok {
				return res, err
			}
		}
	}
	return s.invoke(ctx, u, t, rt, r)
}

// invoke is the invoke step: one call on the route's pooled session. A
// failed or timed-out call closes its session so the next call starts
// clean; a session the upstream forgot gets one fresh initialize and one
// retry; a call its caller cancelled keeps its session (the upstream was
// told with notifications/cancelled, and a stdio thread keeps its process
// and state).
func (s *Service) invoke(ctx context.Context, u *upcall, t target, rt route, r *interceptors.Request) (*interceptors.Result, error) {
	if op := u.fed; op != nil && op.Subscription != nil {
		return s.invokeSubscription(ctx, t, rt, r, op)
	}
	timeout := s.callTimeout(t, r.Tool)
	bridged := u.bridged()
	if bridged {
		u.opts.Input = callInput(u.call)
	}
	for attempt := 0; ; attempt++ {
		sess, err := rt.pool.get(ctx, rt.key, t.srv.Fingerprint, rt.connect)
		if err != nil {
			return nil, connectError(ctx, t.srv, err)
		}
		callCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			callCtx, cancel = context.WithTimeout(ctx, timeout)
		}
		res, err := callSession(callCtx, sess.client, u, r, rt.callHeaders)
		if berr := bridgeAnswer(u, t.srv.Name, bridged, res, err); berr != err {
			// A bridging refusal: the call and its session are fine.
			cancel()
			rt.pool.release(sess)
			return nil, berr
		}
		timedOut := callCtx.Err() != nil
		cancel()
		rt.pool.release(sess)
		if err == nil {
			return &interceptors.Result{Content: res.Content, StructuredContent: res.StructuredContent, IsError: res.IsError, Meta: res.Meta}, nil
		}
		if callerCancelled(ctx) {
			return nil, cancelledError(r.Tool)
		}
		if nativeKeepsSession(u, err, timedOut) || errors.Is(err, mcpclient.ErrAuthorizationRequired) || errors.Is(err, mcpclient.ErrForbidden) {
			// A refused access token: the session is keyed by that token
			// and ages out of the pool; closing it would fail the calls
			// still running on it with the same token, which the oauth
			// step retries once with a fresh one.
			return nil, s.callError(ctx, t.srv, r.Tool, err, timedOut, timeout)
		}
		rt.pool.drop(sess)
		if errors.Is(err, mcpclient.ErrSessionExpired) && attempt == 0 {
			s.log.InfoContext(ctx, "upstream forgot the session; initializing a new one and retrying once", observability.Server(t.srv.Name))
			continue
		}
		return nil, s.callError(ctx, t.srv, r.Tool, err, timedOut, timeout)
	}
}

// callError is the errors step of a call the upstream failed: a timeout
// (naming tool_call_timeout when it was the bound) or an upstream error,
// without a secret of srv.
func (s *Service) callError(ctx context.Context, srv *config.Server, tool string, err error, timedOut bool, timeout time.Duration) error {
	if timedOut || errors.Is(err, context.DeadlineExceeded) {
		limit := ""
		if timeout > 0 && ctx.Err() == nil {
			limit = fmt.Sprintf(" (tool_call_timeout %s)", timeout)
		}
		return bus.Wrap(bus.CodeUpstreamTimeout, err, fmt.Sprintf("tool '%s' on MCP server '%s' timed out%s", tool, srv.Name, limit))
	}
	err = bus.Redact(bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("tool '%s' on MCP server '%s' failed: %v", tool, srv.Name, err)), srv.Redactor())
	s.log.Warn("mcp tool call failed", observability.Server(srv.Name), observability.Tool(tool), observability.Err(err))
	return err
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
