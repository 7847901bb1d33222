// Package mcphttp carries the api service's aggregated MCP endpoint
// (DESIGN §5.1) over HTTP: streamable HTTP at /mcp (POST, GET stream,
// DELETE; protocols 2025-03-26 to 2025-11-25, and the stateless 2026-07-28
// era chosen per request, modern.go) and the 2024-11-05 HTTP+SSE pair
// /sse + /messages?session_id=. The protocol itself is pkg/mcpserver's;
// this package owns identity, sessions and streams.
//
// # Sessions across replicas
//
// A session lives in the JetStream KV bucket bus.Names.MCPSessionsBucket, keyed
// by the SHA-256 of its user and of its id, with the idle timeout as the bucket's TTL: any
// replica accepts any session id, DELETE removes it for every replica at
// once, an idle session expires by itself, and a session carries mutable
// state (log level now; promotions later). Sealing the state into the id
// (AES-GCM) would save a KV read per request but could not be revoked by
// DELETE or expire on idleness without a shared deny list, which is a KV
// bucket again. A session is bound to the user who created it: another
// user's key presenting its id gets 404, as for an unknown id.
//
// # Streams
//
// The 2024-11-05 transport answers POST /messages on the GET /sse stream,
// which one replica holds. That replica subscribes to
// bus.Names.InternalMCPStream(<session id>); the replica that
// receives a POST answers it and publishes the response there (a NATS
// request, so a stream that is gone is a 404 at once). Open streams (GET
// /mcp and /sse) are capped per user; on shutdown (Close) every stream gets
// an SSE retry hint and ends, so clients reconnect to another replica.
//
// # Hooks
//
// Authenticate is the api's bearer-key check (the REST keys and the
// key-less loopback mode); the browser checks (pkg/httpguard: Host, Origin,
// Content-Type) and the body limit are the api router's middleware around
// these handlers, as for REST.
package mcphttp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/inflight"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Config is the endpoint's configuration (plain data).
type Config struct {
	// IdleTimeout expires a session this long after its last use.
	// Defaults to 30m.
	IdleTimeout time.Duration
	// MaxStreamsPerUser caps a user's open GET /mcp and /sse streams on one
	// replica. Defaults to 8.
	MaxStreamsPerUser int
	// MaxSessionsPerUser caps a user's sessions across replicas: a new
	// one past it retires the user's oldest. Defaults to 64.
	MaxSessionsPerUser int
	// KeepAlive is how often an idle stream gets an SSE comment (and its
	// session a touch). Defaults to 25s.
	KeepAlive time.Duration
	// RetryHint is the SSE retry a closing stream advertises. Defaults to 1s.
	RetryHint time.Duration
}

// WithDefaults fills unset fields with their defaults.
func (c Config) WithDefaults() Config {
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 30*time.Minute)
	c.MaxStreamsPerUser = cmp.Or(c.MaxStreamsPerUser, 8)
	c.MaxSessionsPerUser = cmp.Or(c.MaxSessionsPerUser, 64)
	c.KeepAlive = cmp.Or(c.KeepAlive, 25*time.Second)
	c.RetryHint = cmp.Or(c.RetryHint, time.Second)
	return c
}

// Deps are the endpoint's dependencies.
type Deps struct {
	Server *mcpserver.Server
	// Sessions is the bus.Names.MCPSessionsBucket bucket (bus.MCPSessionsKV).
	Sessions jetstream.KeyValue
	NC       *nats.Conn
	// Names are the deployment's subjects.
	Names bus.Names
	// Authenticate returns the caller's user id, or an error (a
	// *bus.Error, unauthorized) for a request without a valid key.
	Authenticate func(r *http.Request) (string, error)
	// Allow is the access policy: nil when the caller of r may use the
	// virtual server named ("" is the whole catalog), else a *bus.Error
	// (forbidden, answered 403; not_found, 404). Nil: everything is
	// allowed.
	Allow func(r *http.Request, virtualServer string) error
	Log   *slog.Logger
	Now   func() time.Time
}

// Handler serves the MCP endpoint's HTTP paths.
type Handler struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	sessions *sessions

	mu      sync.Mutex
	closing chan struct{} // closed by Close: streams end
	closed  bool
	streams *inflight.Limiter // open streams per user
	wg      sync.WaitGroup    // open streams
	// listeners are the open streams that get notifications (notify.go).
	listeners map[*listener]struct{}
	subs      []*nats.Subscription
}

// New builds the handler.
func New(cfg Config, deps Deps) (*Handler, error) {
	if deps.Server == nil || deps.Sessions == nil || deps.NC == nil || deps.Authenticate == nil {
		return nil, errors.New("mcphttp: Server, Sessions, NC and Authenticate are required")
	}
	deps.Log = cmp.Or(deps.Log, observability.Discard())
	if deps.Now == nil {
		deps.Now = time.Now
	}
	cfg = cfg.WithDefaults()
	return &Handler{cfg: cfg, deps: deps, log: deps.Log,
		sessions: newSessions(deps.Sessions, deps.NC, deps.Names.Internal("mcp.sessions.sync"), cfg.IdleTimeout, cfg.MaxSessionsPerUser, deps.Now),
		closing:  make(chan struct{}), streams: inflight.New(cfg.MaxStreamsPerUser), listeners: map[*listener]struct{}{}}, nil
}

// Close stops listening for events, ends every open stream with a retry
// hint and waits for them (or ctx). Requests still in flight are the HTTP
// server's to drain.
func (h *Handler) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
	subs := h.subs
	h.subs = nil
	h.mu.Unlock()
	var errs []error
	for _, sub := range subs {
		errs = append(errs, sub.Unsubscribe())
	}
	h.sessions.cache.Stop()
	h.deps.Server.Stop()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// openStream reserves one of user's streams; release gives it back. When
// the user has none left it answers 429 itself and ok is false.
func (h *Handler) openStream(w http.ResponseWriter, user string) (release func(), ok bool) {
	h.mu.Lock()
	var free func()
	if !h.closed {
		free, ok = h.streams.Acquire(user)
	}
	if !ok {
		h.mu.Unlock()
		writeHTTPError(w, http.StatusTooManyRequests, fmt.Sprintf("too many open streams for this user (at most %d per replica)", h.streams.Max()))
		return nil, false
	}
	h.wg.Add(1)
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			free()
			h.wg.Done()
		})
	}, true
}

// authenticate answers 401 with WWW-Authenticate for a request without a
// valid key.
//
// Before that, a request that sends a header mcpbus checks more than once
// is refused with 400 naming it: a proxy that routes on another of the
// values than mcpbus reads would see another request than mcpbus runs.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	if name := repeatedHeader(r.Header); name != "" {
		writeHTTPError(w, http.StatusBadRequest, "the "+name+" header is sent more than once: send it once")
		return "", false
	}
	user, err := h.deps.Authenticate(r)
	if err != nil {
		be := bus.AsError(err)
		if be.Code == bus.CodeForbidden { // a console cookie without its CSRF token
			writeHTTPError(w, http.StatusForbidden, be.Message)
			return "", false
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpbus"`)
		writeHTTPError(w, http.StatusUnauthorized, be.Message)
		return "", false
	}
	return user, true
}

// authorize answers 403 (404 for a virtual server no one defined) when
// the caller of r may not use the virtual server vs ("" for the whole
// catalog).
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, vs string) bool {
	if h.deps.Allow == nil {
		return true
	}
	if err := h.deps.Allow(r, vs); err != nil {
		be := bus.AsError(err)
		status := http.StatusForbidden
		if be.Code == bus.CodeNotFound {
			status = http.StatusNotFound
		}
		writeHTTPError(w, status, be.Message)
		return false
	}
	return true
}

// singleHeaders are the headers mcpbus reads on /mcp, /sse and /messages,
// each of which must come once (with paramPrefix, every Mcp-Param-*).
var singleHeaders = []string{"Authorization", HeaderSessionID, HeaderProtocolVersion, HeaderMethod, HeaderName,
	HeaderThreadID, bus.HeaderRequestID}

// repeatedHeader returns the name of the first header of singleHeaders
// (or Mcp-Param-*) that header carries more than once, or "".
func repeatedHeader(header http.Header) string {
	for _, name := range singleHeaders {
		if len(header.Values(name)) > 1 {
			return name
		}
	}
	for name, values := range header {
		if len(values) > 1 && len(name) > len(paramPrefix) && strings.EqualFold(name[:len(paramPrefix)], paramPrefix) {
			return name
		}
	}
	return ""
}

// exchange is the caller's Exchange for r on the virtual server vs ("" for
// the whole catalog).
func exchange(r *http.Request, user string, sess *mcpserver.Session, vs string) *mcpserver.Exchange {
	return &mcpserver.Exchange{UserID: user, ThreadHeader: r.Header.Get(HeaderThreadID),
		RequestID: r.Header.Get(bus.HeaderRequestID), Session: sess, VirtualServer: vs}
}

// HTTP headers of the endpoint.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderThreadID        = "Mcpbus-Thread-Id"
)
