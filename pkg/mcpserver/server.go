package mcpserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/kvcache"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Config is the server's configuration (plain data).
type Config struct {
	// Name is serverInfo.name. Defaults to "mcpbus".
	Name string
	// Version is serverInfo.version. Defaults to "dev".
	Version string
	// PageSize is how many tools one tools/list page holds. Defaults to 100.
	PageSize int
	// RequestTimeout bounds one request's wait on the bus. Defaults to 120s.
	RequestTimeout time.Duration
	// PromotionTTL is the promotion bucket's TTL (its mirror trusts an
	// entry no longer). Zero: entries do not expire in the mirror.
	PromotionTTL time.Duration
	// CatalogTTL is the ttlMs of a modern tools/list or server/discover
	// result (how long a client may consider the catalog fresh; a
	// list_changed invalidates it sooner). Defaults to 60s; negative
	// means 0.
	CatalogTTL time.Duration
}

func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, "mcpbus")
	c.Version = cmp.Or(c.Version, "dev")
	if c.PageSize <= 0 {
		c.PageSize = 100
	}
	if c.CatalogTTL == 0 {
		c.CatalogTTL = time.Minute
	} else if c.CatalogTTL < 0 {
		c.CatalogTTL = 0
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 120 * time.Second
	}
	return c
}

// Deps are the server's dependencies.
type Deps struct {
	// NC reaches mcpbus.tools.list and mcpbus.tools.call. Required.
	NC *nats.Conn
	// Names are the deployment's subjects (the zero value: the default
	// namespace).
	Names bus.Names
	Log   *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Promotions is the tool_search promotion bucket
	// (bus.MCPPromotionsKV). Optional: without it tool_search is not
	// listed and deferred tools stay deferred.
	Promotions jetstream.KeyValue
	// StateSealer, when set, seals the requestState of an upstream's
	// input_required relayed to a client, bound to the caller, thread, tool
	// and arguments (and opens a retry's), so one user cannot replay another's state
	// through mcpbus's shared upstream credentials (bridge.go). Nil: the
	// state passes as the upstream sent it.
	StateSealer *crypto.Sealer
	// UsedStates records the sealed requestStates already sent back
	// (bus.MCPStatesKV, kept StateTTL), so each opens once across api
	// replicas. Nil: a sealed state opens until it expires.
	UsedStates jetstream.KeyValue
}

// Server answers MCP messages for one deployment. It holds no per-caller
// state: everything about a caller travels in the Exchange, so one Server
// serves every session of a process and any process serves any session.
// Safe for concurrent use.
type Server struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	legacy *Legacy
	modern *Modern
	// promotions mirrors deps.Promotions (nil without it).
	promotions *kvcache.Cache[promotionRecord]
	// headerTools is what catalogs said of the tools' x-mcp-header
	// annotations (CheckParamHeaders).
	headerTools headerTools
	// callTimeouts holds the tools' timeouts the catalogs gave
	// (calldeadline.go).
	callTimeouts callTimeouts
	// views holds the tools/list views of recent walks (listTools).
	views views
}

// New builds a server.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.NC == nil {
		return nil, errors.New("mcpserver: NC is required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	s := &Server{cfg: cfg.withDefaults(), deps: deps, log: deps.Log}
	s.legacy = newLegacy(s)
	s.modern = newModern(s)
	if deps.Promotions != nil {
		decode := func(b []byte) (promotionRecord, error) {
			var rec promotionRecord
			err := json.Unmarshal(b, &rec)
			return rec, err
		}
		// Misses are authoritative: most threads have no promotions, and a
		// promotion is announced (PromotionAnnounced) to the replicas that
		// must list it at once.
		s.promotions = kvcache.New(deps.Promotions, decode, kvcache.Options{TTL: s.cfg.PromotionTTL, AuthoritativeMisses: true, Log: deps.Log, Now: deps.Now})
	}
	return s, nil
}

// Start starts the mirror of the promotion bucket (a watch), so a call
// costs no bucket read for its thread's promotions; until then, and
// without Start, every call reads the bucket. Stop ends it.
func (s *Server) Start(ctx context.Context) error {
	if s.promotions == nil {
		return nil
	}
	return s.promotions.Start(ctx)
}

// Stop ends what Start started.
func (s *Server) Stop() {
	if s.promotions != nil {
		s.promotions.Stop()
	}
}

// Session is what a legacy-era session remembers between requests. It is
// plain data so a transport can keep it anywhere (KV bucket, memory).
type Session struct {
	// ID is the Mcp-Session-Id (a secret-free random value).
	ID string `json:"-"`
	// UserID is the user who initialized it; nobody else may use it.
	UserID string `json:"user_id"`
	// VirtualServer is the virtual server the session was initialized on
	// (/mcp/v/<name>, /sse/v/<name>); it is used there only.
	VirtualServer   string          `json:"virtual_server,omitempty"`
	ProtocolVersion string          `json:"protocol_version"`
	ClientInfo      json.RawMessage `json:"client_info,omitempty"`
	// ClientCapabilities is the part of initialize's capabilities an
	// upstream may act on (bus.CapabilitiesOf); nil for a session stored
	// before it was kept.
	ClientCapabilities *bus.ClientCapabilities `json:"client_capabilities,omitempty"`
	// LogLevel is the last logging/setLevel ("" until one is sent).
	LogLevel string `json:"log_level,omitempty"`
	// Subscriptions are the resources the session subscribed to
	// (subscriptions.go).
	Subscriptions []SessionSubscription `json:"subscriptions,omitempty"`
	CreatedAt     time.Time             `json:"created_at"`
	// TouchedAt is when a transport last stored it (idle expiry counts from
	// there).
	TouchedAt time.Time `json:"touched_at"`

	// Digests are the definition digests the session's tools/list showed,
	// by tool name, each cut to bus.MinSessionDigest hex digits (at most
	// maxSessionDigests tools): a tools/call without _meta["mcpbus/digest"]
	// is checked against it (digests.go).
	Digests map[string]string `json:"digests,omitempty"`
}

// Exchange is one caller's side of a message: who asks, in which thread,
// within which session. A transport fills it before Dispatch and reads
// Session, Created and Changed after.
type Exchange struct {
	// UserID is the authenticated user.
	UserID string
	// VirtualServer is the virtual server the caller uses (its session's,
	// the endpoint's path, stdio's --virtual); "" for the whole catalog.
	// Every list, search and call names it on the bus.
	VirtualServer string
	// ThreadHeader is the thread the caller named (Mcpbus-Thread-Id, the
	// stdio --thread flag); empty when none.
	ThreadHeader string
	// RequestID travels as Mcpbus-Request-Id on the bus when set.
	RequestID string
	// Session is the caller's session (nil before initialize, and always
	// in the modern era).
	Session *Session
	// Scope names the id space of the caller's JSON-RPC ids when there is
	// no session, so a notifications/cancelled can name a call: the stdio
	// process's (random, per stream). Empty: each modern request gets its
	// own.
	Scope string
	// Created is set by initialize: Session is new and must be stored.
	Created bool
	// Changed is set when Session changed and must be stored again.
	Changed bool
	// Notify, when set, sends a message about the request being answered
	// (notifications/progress) on the transport's channel for it: the
	// POST's SSE stream, the session's stream, stdout. It is called on the
	// goroutine running Dispatch, before Dispatch returns. Nil: the
	// transport cannot, and no progress is asked for.
	Notify func(*Message)
	// tasksExtension is set for a modern request that declares the
	// io.modelcontextprotocol/tasks extension (tasksext.go).
	tasksExtension bool
}

// Thread is the caller's thread: the named one, else the session's (the
// session id's bus.Digest: the thread travels on the bus, in subjects and
// audit records, and the id must not), else "default" (DESIGN §5.1).
func (x *Exchange) Thread() string {
	if x.ThreadHeader != "" {
		return x.ThreadHeader
	}
	if x.Session != nil && x.Session.ID != "" {
		return bus.Digest(x.Session.ID)
	}
	return bus.DefaultScopeID
}

// Era is one protocol era's method table.
type Era interface {
	// Name names the era in logs ("legacy", "modern").
	Name() string
	// Dispatch answers m: a response for a request, nil for a notification
	// or a response from the client.
	Dispatch(ctx context.Context, x *Exchange, m *Message) *Message
}

// Legacy is the era of initialize and sessions (2024-11-05 to 2025-11-25).
func (s *Server) Legacy() Era { return s.legacy }

// EraOf picks m's era (IsModern), once per message: a protocol version in
// _meta, server/discover or subscriptions/listen, or a modern headerVersion
// is modern; initialize and the rest legacy.
func (s *Server) EraOf(m *Message, headerVersion string) Era {
	if IsModern(m, headerVersion) {
		return s.modern
	}
	return s.legacy
}

// NewSessionID returns a fresh session id: 128 random bits in hex (visible
// ASCII, as the streamable HTTP transport requires).
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// busCtx bounds a bus request and carries the request id.
func (s *Server) busCtx(ctx context.Context, x *Exchange) (context.Context, context.CancelFunc) {
	if x.RequestID != "" {
		ctx = bus.WithRequestID(ctx, x.RequestID)
	}
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}
