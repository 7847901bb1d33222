package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Resource subscriptions (docs/federation.md §5). mcpbus.resources.subscribe
// and .unsubscribe take the federation path (scope, resolution, guardrails
// with kind resource, the chain for credentials, audit) and, like native
// task requests, the owning replica's hand-over for every transport: the
// replica that owns a connection's session key (rendezvous over the live
// replicas) keeps its subscriptions in memory, so every subscriber of one
// (connection, raw URI) lands on one registry and one upstream
// subscription serves them all.
//
// The connection (docs/federation.md §5): a stdio thread's own session,
// whatever its era (a stdio server's state is its process's); over
// HTTP/SSE the callers' own session when it speaks 2025-11-25 (a server's
// per-session state is the one their calls change), else a session of its
// own, 2025-11-25 where the server has it and 2026-07-28 otherwise. A
// 2025-11-25 session subscribes with resources/subscribe (updates come on
// its GET stream over streamable HTTP); a 2026-07-28 one with one
// subscriptions/listen carrying the union of the connection's URIs
// (mcpclient.ListenResources, lockConn), narrowed and ended as they leave.
// Its key is the session key's digest; no credential appears on the bus.
//
// A subscriber stays subscribed for bus.SubscriptionTTLSeconds after its
// last subscribe (stream holders send it again every
// bus.SubscriptionRefreshSeconds while the stream is open); the first
// subscriber of a (connection, URI) subscribes it upstream, the last one
// to leave (unsubscribe or expiry) ends it. Only the subscribe, the
// unsubscribe and the expiry are audited, not a refresh. A
// subscribe that finds the connection replaced (the upstream went away, or
// the owner changed and a refresh landed on the new one) subscribes the new
// connection. Each upstream notifications/resources/updated is published
// once per subscribed user on bus.ResourcesUpdated(user), naming the user's
// subscribers, with the visible URI.

// subOp is what a subscription request carries to the owning replica.
type subOp struct {
	RawURI      string `json:"raw_uri"`
	Subscriber  string `json:"subscriber"`
	Unsubscribe bool   `json:"unsubscribe,omitempty"`
}

// subKey is one upstream subscription: a connection and a raw URI.
type subKey struct{ conn, raw string }

// subEntry is one upstream subscription and its subscribers.
type subEntry struct {
	server string
	// mu is held while the upstream is asked, so a second subscriber
	// replies only once the subscription is in place.
	mu sync.Mutex
	// client is the session the upstream subscription was made on (nil
	// until it is).
	client *mcpclient.Client
	// subscribers by user and subscriber id (one user cannot end
	// another's subscription by naming its id), guarded by registry.mu.
	subscribers map[subscriberKey]subscriber
}

// subscriberKey is one subscriber: its user and its id.
type subscriberKey struct{ user, id string }

// subscriber is when a subscriber's subscription ends unless sent again,
// and the thread it was made in (for the audit record of its expiry).
type subscriber struct {
	expires time.Time
	thread  string
}

// expiredSub is a subscriber whose subscription expired.
type expiredSub struct {
	key    subKey
	server string
	sub    subscriberKey
	thread string
}

// subRegistry is this replica's upstream subscriptions.
type subRegistry struct {
	mu    sync.Mutex
	byKey map[subKey]*subEntry
	// conns serializes the changes of one 2026-07-28 connection's listen
	// (each sends the connection's whole set of URIs).
	conns map[string]*connLock
}

// connLock is one connection's lock and how many hold or wait for it.
type connLock struct {
	sync.Mutex
	n int
}

func newSubRegistry() *subRegistry {
	return &subRegistry{byKey: map[subKey]*subEntry{}, conns: map[string]*connLock{}}
}

// lockConn locks connection conn's listen changes; the func unlocks.
func (r *subRegistry) lockConn(conn string) func() {
	r.mu.Lock()
	l := r.conns[conn]
	if l == nil {
		l = &connLock{}
		r.conns[conn] = l
	}
	l.n++
	r.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		r.mu.Lock()
		if l.n--; l.n == 0 {
			delete(r.conns, conn)
		}
		r.mu.Unlock()
	}
}

// listening is the raw URIs subscribed on connection conn's client c (the
// URIs of its 2026-07-28 listen), with extra added when not empty. The
// caller holds lockConn(conn), under which the entries' clients of conn
// change.
func (r *subRegistry) listening(conn string, c *mcpclient.Client, extra string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	if extra != "" {
		out = append(out, extra)
	}
	for k, e := range r.byKey {
		if k.conn == conn && k.raw != extra && e.client == c && len(e.subscribers) > 0 {
			out = append(out, k.raw)
		}
	}
	return out
}

// entry returns the entry of k, created when absent.
func (r *subRegistry) entry(k subKey, server string) *subEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byKey[k]
	if e == nil {
		e = &subEntry{server: server, subscribers: map[subscriberKey]subscriber{}}
		r.byKey[k] = e
	}
	return e
}

// put records a subscriber of k until expires and reports whether it was
// one already (a refresh).
func (r *subRegistry) put(k subKey, e *subEntry, sub subscriberKey, thread string, expires time.Time) (refresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, refresh = e.subscribers[sub]
	e.subscribers[sub] = subscriber{expires: expires, thread: thread}
	r.byKey[k] = e
	return refresh
}

// remove takes subscriber id off k; when it was the last one the entry
// goes and its client is returned (to unsubscribe upstream).
func (r *subRegistry) remove(k subKey, sub subscriberKey) *mcpclient.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byKey[k]
	if e == nil {
		return nil
	}
	delete(e.subscribers, sub)
	if len(e.subscribers) > 0 {
		return nil
	}
	delete(r.byKey, k)
	return e.client
}

// expire drops the subscribers whose time is up and returns them and the
// entries left with none (their keys are gone from the registry).
func (r *subRegistry) expire(now time.Time) (map[subKey]*subEntry, []expiredSub) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[subKey]*subEntry{}
	var expired []expiredSub
	for k, e := range r.byKey {
		for sub, v := range e.subscribers {
			if now.After(v.expires) {
				delete(e.subscribers, sub)
				expired = append(expired, expiredSub{key: k, server: e.server, sub: sub, thread: v.thread})
			}
		}
		if len(e.subscribers) == 0 {
			delete(r.byKey, k)
			out[k] = e
		}
	}
	return out, expired
}

// subscribersOf is k's subscriber ids by user.
func (r *subRegistry) subscribersOf(k subKey) (server string, byUser map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byKey[k]
	if e == nil {
		return "", nil
	}
	byUser = map[string][]string{}
	for sub := range e.subscribers {
		byUser[sub.user] = append(byUser[sub.user], sub.id)
	}
	return e.server, byUser
}

// handleSubscribe serves mcpbus.resources.subscribe.
func (s *Service) handleSubscribe(ctx context.Context, req bus.ResourcesSubscribeRequest) (bus.ResourcesSubscribeReply, error) {
	return s.subscription(ctx, req, false)
}

// handleUnsubscribe serves mcpbus.resources.unsubscribe: {} also for a
// subscription that is gone.
func (s *Service) handleUnsubscribe(ctx context.Context, req bus.ResourcesSubscribeRequest) (bus.ResourcesSubscribeReply, error) {
	if _, err := s.subscription(ctx, req, true); err != nil {
		return bus.ResourcesSubscribeReply{}, err
	}
	return bus.ResourcesSubscribeReply{}, nil
}

func (s *Service) subscription(ctx context.Context, req bus.ResourcesSubscribeRequest, unsubscribe bool) (bus.ResourcesSubscribeReply, error) {
	switch {
	case req.URI == "":
		return bus.ResourcesSubscribeReply{}, bus.Errorf(bus.CodeInvalidRequest, "uri: required")
	case req.Subscriber == "" || len(req.Subscriber) > 128:
		return bus.ResourcesSubscribeReply{}, bus.Errorf(bus.CodeInvalidRequest, "subscriber: required, at most 128 characters")
	}
	server, raw, err := s.resolveURI(ctx, req.UserID, req.ThreadID, req.URI)
	if err != nil {
		return bus.ResourcesSubscribeReply{}, err
	}
	method := mcpclient.MethodResourcesSubscribe
	if unsubscribe {
		method = mcpclient.MethodResourcesUnsubscribe
	}
	params, _ := json.Marshal(map[string]string{"uri": raw})
	res, err := s.runFed(ctx, fedRequest{op: &fedOp{Method: method, Params: params, Subscription: &subOp{RawURI: raw, Subscriber: req.Subscriber, Unsubscribe: unsubscribe}},
		kind: bus.GuardrailKindResource, server: server, rawURI: raw, label: bus.StripQuery(raw),
		sc:       bus.Scope{UserID: req.UserID, ThreadID: req.ThreadID},
		unmapped: func() error { return bus.UnmappedURI(server) }})
	if err != nil {
		return bus.ResourcesSubscribeReply{}, err
	}
	var out struct {
		Connection string `json:"connection"`
	}
	_ = json.Unmarshal(res, &out)
	return bus.ResourcesSubscribeReply{Server: server, URI: req.URI, Connection: out.Connection}, nil
}

// subscription reports a subscription request: it goes to the replica
// owning its session key for every transport (the registry is that
// replica's).
func (u *upcall) subscription() bool {
	return u.fed != nil && u.fed.Subscription != nil
}

// invokeSubscription is the invoke step of a subscription request on the
// owning replica.
func (s *Service) invokeSubscription(ctx context.Context, t target, rt route, r *interceptors.Request, op *fedOp) (*interceptors.Result, error) {
	empty := &interceptors.Result{Content: []json.RawMessage{}}
	if t.srv.Type == config.TransportStdio {
		// A stdio server keeps state per process: a thread subscribes on
		// its own session, whatever its era, so the resources its calls
		// change are the ones subscribed.
		return s.subscribeOn(ctx, t, rt, rt.key, rt.connect, r, op, empty)
	}
	key := rt.key
	key.scope = "sub:" + key.scope
	connect := func(ctx context.Context) (*mcpclient.Client, error) {
		spec, err := rt.spec()
		if err != nil {
			return nil, err
		}
		spec.OnResourceUpdated = s.onResourceUpdated(key)
		// resources/subscribe where the server has it (a 2025-11-25
		// session, whose GET stream brings the updates); a server that
		// speaks 2026-07-28 only gets a listen (subscribeOn).
		spec.Era = mcpclient.EraLegacy
		c, err := s.connect(ctx, t, spec)
		if err == nil || ctx.Err() != nil {
			return c, err
		}
		spec.Era = mcpclient.EraModern
		if c, merr := s.connect(ctx, t, spec); merr == nil {
			return c, nil
		}
		return nil, err
	}
	if op.Subscription.Unsubscribe {
		// Whichever of the two sessions below holds it.
		if _, err := s.subscribeOn(ctx, t, rt, rt.key, rt.connect, r, op, empty); err != nil {
			return nil, err
		}
		return s.subscribeOn(ctx, t, rt, key, connect, r, op, empty)
	}
	// HTTP and SSE: the callers' own session (the one their calls use)
	// when it speaks 2025-11-25, so a server's per-session state (what
	// their calls changed, what they toggled) is the subscribed one's;
	// else a session of its own.
	if own, err := rt.pool.get(ctx, rt.key, t.srv.Fingerprint, rt.connect); err == nil {
		legacy := own.client.ServerInfo().Era == mcpclient.EraLegacy
		rt.pool.release(own)
		if legacy {
			return s.subscribeOn(ctx, t, rt, rt.key, rt.connect, r, op, empty)
		}
	}
	return s.subscribeOn(ctx, t, rt, key, connect, r, op, empty)
}

// onResourceUpdated is the Spec.OnResourceUpdated of the session with key.
func (s *Service) onResourceUpdated(key sessionKey) func(uri string) {
	conn := bus.Digest(key.affinityKey())
	return func(uri string) { s.resourceUpdated(subKey{conn: conn, raw: uri}) }
}

// subscribeOn subscribes (or unsubscribes) op's URI on the session key:
// resources/subscribe on a 2025-11-25 session, the session's listen
// (mcpclient.ListenResources, the union of the connection's URIs) on a
// 2026-07-28 one.
func (s *Service) subscribeOn(ctx context.Context, t target, rt route, key sessionKey, connect connectFunc, r *interceptors.Request, op *fedOp, empty *interceptors.Result) (*interceptors.Result, error) {
	conn := bus.Digest(key.affinityKey())
	k := subKey{conn: conn, raw: op.Subscription.RawURI}
	if op.Subscription.Unsubscribe {
		if c := s.subs.remove(k, subscriberKey{user: r.UserID, id: op.Subscription.Subscriber}); c != nil {
			s.unsubscribeUpstream(ctx, t.srv.Name, c, k, rt.callHeaders)
		}
		op.result = json.RawMessage(`{}`)
		return empty, nil
	}
	sess, err := rt.pool.get(ctx, key, t.srv.Fingerprint, connect)
	if err != nil {
		return nil, connectError(ctx, t.srv, err)
	}
	defer rt.pool.release(sess)
	if !sess.client.ServerInfo().Features.ResourcesSubscribe {
		return nil, bus.Errorf(bus.CodeInvalidRequest, "MCP server '%s' does not support resource subscriptions (it declares no resources.subscribe)", t.srv.Name)
	}
	modern := sess.client.ServerInfo().Era == mcpclient.EraModern
	if modern {
		defer s.subs.lockConn(conn)()
	}
	e := s.subs.entry(k, t.srv.Name)
	e.mu.Lock()
	defer e.mu.Unlock()
	// A 2026-07-28 session's listen is asked for at every subscribe and
	// refresh: a no-op while it is open with the same URIs, it is opened
	// again when the server ended it.
	if e.client != sess.client || modern {
		var err error
		if modern {
			err = sess.client.ListenResources(ctx, s.subs.listening(conn, sess.client, k.raw))
		} else {
			_, err = sess.client.Request(ctx, mcpclient.MethodResourcesSubscribe, op.Params, &mcpclient.CallOptions{Headers: rt.callHeaders})
		}
		if err != nil {
			if rpc, ok := asRPCError(err); ok {
				op.rpcError = rpc
				return empty, nil
			}
			rt.pool.drop(sess)
			return nil, s.callError(ctx, t.srv, r.Tool, err, ctx.Err() != nil, 0)
		}
		if e.client != sess.client {
			e.client = sess.client
			s.log.Info("upstream resource subscription made", observability.Server(t.srv.Name), "uri", bus.StripQuery(k.raw))
		}
	}
	refresh := s.subs.put(k, e, subscriberKey{user: r.UserID, id: op.Subscription.Subscriber}, r.ThreadID, s.deps.Clock().Add(bus.SubscriptionTTLSeconds*time.Second))
	op.result, _ = json.Marshal(subResult{Connection: conn, Refresh: refresh})
	return empty, nil
}

// unsubscribeUpstream ends the upstream subscription k on c, whose last
// subscriber left: resources/unsubscribe on a 2025-11-25 session; on a
// 2026-07-28 one the listen narrowed to the connection's other URIs (ended
// when none is left). Errors are logged: the session may be gone, which
// ends it too.
func (s *Service) unsubscribeUpstream(ctx context.Context, server string, c *mcpclient.Client, k subKey, headers map[string]string) {
	if !c.Alive() {
		return
	}
	var err error
	if c.ServerInfo().Era == mcpclient.EraModern {
		unlock := s.subs.lockConn(k.conn)
		err = c.ListenResources(ctx, s.subs.listening(k.conn, c, ""))
		unlock()
	} else {
		params, _ := json.Marshal(map[string]string{"uri": k.raw})
		_, err = c.Request(ctx, mcpclient.MethodResourcesUnsubscribe, params, &mcpclient.CallOptions{Headers: headers})
	}
	if err != nil {
		s.log.Warn("upstream resource unsubscribe failed", observability.Server(server), "uri", bus.StripQuery(k.raw), observability.Err(err))
		return
	}
	s.log.Info("upstream resource subscription ended", observability.Server(server), "uri", bus.StripQuery(k.raw))
}

// resourceUpdated publishes an upstream's notifications/resources/updated
// to each subscribed user. It runs on the session's reader: publishing is
// non-blocking.
func (s *Service) resourceUpdated(k subKey) {
	server, byUser := s.subs.subscribersOf(k)
	if len(byUser) == 0 {
		return
	}
	visible := k.raw
	if s.prefixed(server) {
		visible = bus.VisibleURI(server, k.raw)
	}
	for user, ids := range byUser {
		body, _ := json.Marshal(bus.ResourceUpdated{Connection: k.conn, Server: server, URI: visible, RawURI: k.raw, Subscribers: ids})
		if err := s.deps.NC.Publish(s.deps.Names.ResourcesUpdated(user), body); err != nil {
			s.log.Warn("resource update not published", observability.Server(server), observability.Err(err))
		}
	}
}

// expireSubscriptions ends, every few seconds until ctx ends, the
// subscriptions whose subscribers were not sent again within the TTL.
func (s *Service) expireSubscriptions(ctx context.Context) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		gone, expired := s.subs.expire(s.deps.Clock())
		for _, x := range expired {
			s.auditExpiry(ctx, x)
		}
		for k, e := range gone {
			if e.client != nil {
				uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				s.unsubscribeUpstream(uctx, e.server, e.client, k, nil)
				cancel()
			}
		}
	}
}

// subResult is the result of a subscribe on the owning replica: the
// connection, and whether the subscriber was subscribed already (a
// refresh, which is not audited).
type subResult struct {
	Connection string `json:"connection"`
	Refresh    bool   `json:"refresh,omitempty"`
}

// isRefresh reports a subscribe that only renewed a subscriber.
func (op *fedOp) isRefresh() bool {
	if op.Subscription == nil || op.Subscription.Unsubscribe {
		return false
	}
	var res subResult
	return json.Unmarshal(op.result, &res) == nil && res.Refresh
}

// auditExpiry writes the audit record of a subscription that ended
// because its subscriber was not sent again within the TTL (its stream
// closed without an unsubscribe): resources/unsubscribe, outcome expired.
func (s *Service) auditExpiry(ctx context.Context, x expiredSub) {
	if !s.deps.Audit.Enabled() {
		return
	}
	s.deps.Audit.Write(ctx, audit.Record{Kind: audit.KindCall, User: x.sub.user, Thread: x.thread,
		Tool: mcpclient.MethodResourcesUnsubscribe + " " + bus.StripQuery(x.key.raw), Server: x.server, Outcome: outcomeExpired})
}

// outcomeExpired is the audit outcome of a subscription that expired.
const outcomeExpired = "expired"

// asRPCError is err's upstream JSON-RPC error.
func asRPCError(err error) (*bus.RPCError, bool) {
	var rpc *mcpclient.RPCError
	if errors.As(err, &rpc) {
		return &bus.RPCError{Code: rpc.Code, Message: rpc.Message}, true
	}
	return nil, false
}
