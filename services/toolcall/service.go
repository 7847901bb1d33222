package toolcall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/coalesce"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/egress"
	"github.com/mcpbus/mcpbus/pkg/guardrails"
	"github.com/mcpbus/mcpbus/pkg/inflight"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/presence"
	"github.com/mcpbus/mcpbus/pkg/replica"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tokenclient"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Config is the toolcall service's configuration (plain data).
type Config struct {
	// WorkspaceRoot holds thread workspaces for stdio servers without cwd.
	// Defaults to .mcpbus/workspace.
	WorkspaceRoot string
	// MaxSessions bounds the stdio session pool and, separately, the pool
	// of HTTP/SSE sessions. Defaults to 256.
	MaxSessions int
	// MaxSessionsPerUser bounds one user's stdio sessions: a user's new
	// session past it retires that user's least recently used one, so no
	// user can evict another's by cycling thread ids. Defaults to 32
	// (at most MaxSessions).
	MaxSessionsPerUser int
	// StopTimeout bounds the wait for in-flight calls on shutdown
	// (shutdown.drain_seconds). Defaults to 30s.
	StopTimeout time.Duration
	// PresenceInterval is the heartbeat interval of this replica in the
	// presence bucket; another replica counts it gone after three missed
	// beats. Defaults to 2s.
	PresenceInterval time.Duration
	// Guardrails is config.yaml's guardrails block (disabled when zero).
	Guardrails config.Guardrails
	// Personal is the personal stdio launch policy's options
	// (launchpolicy.OptionsFrom), applied before every spawn of a personal
	// stdio server. The zero value refuses them; WorkspaceRoot defaults to
	// Config.WorkspaceRoot.
	Personal launchpolicy.PersonalOptions
	// MCPTasks is config.yaml's mcp_tasks block: submits of task toolsets
	// are tracked only when it is enabled and Deps.Tasks is set.
	MCPTasks config.MCPTasks
	// Upstream is the egress allowlist and timeout maxima of personal
	// connections and the response cap of every server. The zero value
	// allows no internal address and uses the default maxima and cap.
	Upstream config.Upstream
	// Virtual is config.yaml's virtual servers and the NATS identities
	// bound to them (virtual.go). The zero value: none.
	Virtual config.VirtualSettings
}

// Deps are the toolcall service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	// Names are the deployment's subjects, buckets and stream (the
	// zero value: the default namespace).
	Names bus.Names
	KV    jetstream.KeyValue
	// PresenceKV is the presence bucket (bus.PresenceKV), where the
	// replicas find each other.
	PresenceKV jetstream.KeyValue
	// LocalExtensions is used until the KV bucket holds a config (may be nil).
	LocalExtensions *config.Extensions
	// Interceptors resolves mcpInterceptors entries. Defaults to
	// interceptors.Default() (request_logger, set_header).
	Interceptors *interceptors.Registry
	// Tokens gets OAuth headers from the tokens service. Defaults to a
	// client on NC.
	Tokens *tokenclient.Client
	// Tasks stores the rows of durable task submits (nil: submits are
	// refused with the "task runtime is not initialized" error).
	Tasks store.TaskSubmitStore
	// ReplicaID is this replica's presence id, the owner named for the
	// stdio sessions it runs: the process's replica id
	// (bootstrap.Runtime.ReplicaID). Defaults to a new replica.NewID.
	ReplicaID string
	// Metrics are the service's Prometheus metrics
	// (metrics.NewToolcall on the process's registry). Defaults to
	// metrics on a registry of their own.
	Metrics *metrics.Toolcall
	// Audit writes a record per tool call (nil: none).
	Audit *audit.Writer
	// Eras remembers each upstream's protocol era, seeded from the
	// catalog (mcpclient.EraCache). Defaults to a new one.
	Eras *mcpclient.EraCache
	// Clock stamps durable task submits and is the clock of the quota
	// windows (virtual.go). Defaults to time.Now.
	Clock func() time.Time
}

// ConfigFrom maps config.yaml onto the Config; busMaxPayload is the NATS
// connection's MaxPayload (the response cap follows it).
func ConfigFrom(s *config.Settings, busMaxPayload int64) Config {
	return Config{WorkspaceRoot: s.Workspace.Root, MaxSessions: s.StdioPool.MaxSessions, MaxSessionsPerUser: s.StdioPool.MaxSessionsPerUser,
		StopTimeout: time.Duration(s.Shutdown.DrainSeconds) * time.Second, Guardrails: s.Guardrails,
		Personal: launchpolicy.OptionsFrom(s), MCPTasks: s.MCPTasks, Upstream: s.Upstream(busMaxPayload), Virtual: s.Virtual()}
}

// Service is the toolcall service.
type Service struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	watcher  *sharedstate.Watcher
	resolver *resolver
	personal *personalConfigs
	sweeps   *sweepQueue
	policy   *launchpolicy.Personal
	egress   *egress.Policy // personal http/sse connections
	guard    *guardrails.Guard
	presence *presence.Tracker // the live toolcall replicas: who owns a stdio session
	stdio    *pool             // per (server, user:thread), the sessions this replica owns
	remote   *pool             // per (server, header fingerprint)
	chains   *chainCache
	// calls are the calls in flight that mcpbus.tools.cancel (and
	// mcpbus.u.<user>.tools.cancel) can end.
	calls callRegistry
	// userCalls and serverCalls cap the calls in flight per user and per
	// upstream server (inflight.go).
	userCalls, serverCalls *inflight.Limiter
	// metrics are Deps.Metrics.
	metrics *metrics.Toolcall
	// rediscover publishes the upstreams' list_changed (notify.go).
	rediscover *coalesce.Group[rediscoverKey]
	// virtual is the virtual servers and their quotas (virtual.go).
	virtual *virtualState
	// subs are the upstream resource subscriptions this replica owns
	// (subscriptions.go).
	subs *subRegistry

	warnOnce sync.Map // one-time warnings, by key
	ready    atomic.Bool
}

// New validates the dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.KV == nil || deps.PresenceKV == nil {
		return nil, errors.New("toolcall: NC, KV and PresenceKV are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if deps.Interceptors == nil {
		deps.Interceptors = interceptors.Default()
	}
	if deps.Tokens == nil {
		deps.Tokens = tokenclient.New(deps.NC, deps.Names)
	}
	if deps.ReplicaID == "" {
		deps.ReplicaID = replica.NewID()
	}
	if deps.Eras == nil {
		deps.Eras = mcpclient.NewEraCache()
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	if cfg.WorkspaceRoot == "" {
		cfg.WorkspaceRoot = ".mcpbus/workspace"
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 256
	}
	if cfg.MaxSessionsPerUser <= 0 {
		cfg.MaxSessionsPerUser = 32
	}
	cfg.MaxSessionsPerUser = min(cfg.MaxSessionsPerUser, cfg.MaxSessions)
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.Personal.WorkspaceRoot == "" {
		cfg.Personal.WorkspaceRoot = cfg.WorkspaceRoot
	}
	policy, err := launchpolicy.NewPersonal(cfg.Personal)
	if err != nil {
		return nil, fmt.Errorf("toolcall: %w", err)
	}
	log := observability.ForService(deps.Log, "toolcall")
	guard, err := guardrails.New(cfg.Guardrails, deps.NC, log)
	if err != nil {
		return nil, fmt.Errorf("toolcall: %w", err)
	}
	egressPolicy, err := egress.New(cfg.Upstream.Egress.Allow, log)
	if err != nil {
		return nil, fmt.Errorf("toolcall: %w", err)
	}
	watcher := sharedstate.NewWatcher(deps.KV, deps.LocalExtensions, log)
	watcher.FollowReconnects(deps.NC)
	watcher.AckTo(deps.PresenceKV, presenceGroup, deps.ReplicaID)
	s := &Service{
		cfg: cfg, deps: deps, log: log, egress: egressPolicy,
		watcher:  watcher,
		resolver: newResolver(deps.NC, deps.Names),
		virtual:  newVirtualState(virtual.NewLive(cfg.Virtual), deps.Clock),
		personal: newPersonalConfigs(deps.NC, deps.Names),
		sweeps:   newSweepQueue(),
		policy:   policy,
		guard:    guard,
		presence: presence.New(deps.PresenceKV, presence.Config{Group: presenceGroup, Self: deps.ReplicaID, Interval: cfg.PresenceInterval, Conn: deps.NC}, log),
		stdio: newPool(cfg.MaxSessions, cfg.MaxSessionsPerUser, func(k sessionKey) {
			log.Warn("an MCP server process exited on its own; its session is closed and the next call starts a new one",
				observability.Server(k.server), "scope", k.scope)
		}),
		remote:      newPool(cfg.MaxSessions, 0, nil),
		chains:      newChainCache(),
		userCalls:   inflight.New(cmp.Or(cfg.Upstream.Limits.MaxCallsInFlightPerUser, config.DefaultMaxCallsInFlightPerUser)),
		serverCalls: inflight.New(cmp.Or(cfg.Upstream.Limits.MaxCallsInFlightPerServer, config.DefaultMaxCallsInFlightPerServer)),
	}
	s.rediscover = s.newRediscoverer()
	s.subs = newSubRegistry()
	s.instrument()
	return s, nil
}

// Run serves until ctx is cancelled, then drains, closes every session and
// returns.
func (s *Service) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	s.watcher.OnChange(func(_, next sharedstate.Snapshot) {
		s.virtual.live.Apply(next.VirtualRevision, next.VirtualServers)
	})
	s.watcher.OnChange(s.onStateChange)
	watchDone, err := s.watcher.Start(watchCtx)
	if err != nil {
		return fmt.Errorf("toolcall: %w", err)
	}
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		go s.expireSubscriptions(watchCtx)
		s.sweepPersonal(watchCtx)
	}()
	defer func() { stopWatch(); <-sweepDone }()
	defer s.rediscover.Close()
	sub, err := s.deps.NC.Subscribe(s.deps.Names.EventsCatalog(), func(*nats.Msg) { s.resolver.invalidate() })
	if err != nil {
		return fmt.Errorf("toolcall: subscribe %s: %w", s.deps.Names.EventsCatalog(), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	personalSub, err := s.deps.NC.Subscribe(s.deps.Names.PersonalEventsAll(), s.onPersonalEvent)
	if err != nil {
		return fmt.Errorf("toolcall: subscribe %s: %w", s.deps.Names.PersonalEventsAll(), err)
	}
	defer func() { _ = personalSub.Unsubscribe() }()
	closeSub, err := s.deps.NC.Subscribe(SubjectSessionsClose(s.deps.Names), s.handleSessionsClose)
	if err != nil {
		return fmt.Errorf("toolcall: subscribe %s: %w", SubjectSessionsClose(s.deps.Names), err)
	}
	defer func() { _ = closeSub.Unsubscribe() }()
	cancelSub, err := s.deps.NC.Subscribe(s.deps.Names.ToolsCancel(), s.handleCancel)
	if err != nil {
		return fmt.Errorf("toolcall: subscribe %s: %w", s.deps.Names.ToolsCancel(), err)
	}
	defer func() { _ = cancelSub.Unsubscribe() }()
	if s.deps.Names.UserSubjects() {
		userCancelSub, err := s.deps.NC.Subscribe(s.deps.Names.AnyUser(bus.VerbToolsCancel), s.handleUserCancel)
		if err != nil {
			return fmt.Errorf("toolcall: subscribe %s: %w", s.deps.Names.AnyUser(bus.VerbToolsCancel), err)
		}
		defer func() { _ = userCancelSub.Unsubscribe() }()
	}

	svc, err := microsvc.Register(s.deps.NC, s.deps.Names, bus.ServiceToolcall, "tool calls: sessions, credentials, guardrails", s.log)
	if err != nil {
		return err
	}
	// The hand-over entry is served before this replica joins: the others
	// hand a thread's calls to it as soon as they see its heartbeat, and a
	// hand-over that found no responder would mark it gone (presence.Gone).
	if err := microsvc.Handle(svc, "stdio-owner", stdioSubject(s.deps.Names, s.presence.Self()), s.handleStdioCall); err != nil {
		_ = svc.Stop(context.Background())
		return err
	}
	if err := s.deps.NC.Flush(); err != nil {
		_ = svc.Stop(context.Background())
		return fmt.Errorf("toolcall: flush the hand-over subscription: %w", err)
	}

	// Join the replicas before serving calls, so the first calls already go
	// to the sessions' owners; leave (delete the heartbeat) after the last.
	s.presence.OnChange(s.closeUnowned)
	presenceCtx, leave := context.WithCancel(context.Background())
	presenceDone, err := s.presence.Start(presenceCtx)
	if err != nil {
		leave()
		_ = svc.Stop(context.Background())
		return fmt.Errorf("toolcall: %w", err)
	}
	defer func() { leave(); <-presenceDone }()

	if err := errors.Join(
		microsvc.HandleVerb(svc, "tools-call", bus.VerbToolsCall, s.observeCall(s.handleCall)),
		microsvc.Handle(svc, "internal-call", s.deps.Names.InternalCall(), s.handleInternalCall),
		microsvc.HandleVerb(svc, "resources-read", bus.VerbResourcesRead, s.handleRead),
		microsvc.HandleVerb(svc, "prompts-get", bus.VerbPromptsGet, s.handlePromptGet),
		microsvc.HandleVerb(svc, "completion-complete", bus.VerbCompletionComplete, s.handleComplete),
		microsvc.HandleVerb(svc, "resources-subscribe", bus.VerbResourcesSubscribe, s.handleSubscribe),
		microsvc.HandleVerb(svc, "resources-unsubscribe", bus.VerbResourcesUnsubscribe, s.handleUnsubscribe),
	); err != nil {
		_ = svc.Stop(context.Background())
		return err
	}
	// Ready only once the server has the subscriptions.
	if err := s.deps.NC.Flush(); err != nil {
		_ = svc.Stop(context.Background())
		return fmt.Errorf("toolcall: flush subscriptions: %w", err)
	}
	svc.SetReady(true)
	s.ready.Store(true)
	defer s.ready.Store(false)
	s.log.Info("toolcall service started", "workspace_root", s.cfg.WorkspaceRoot, "max_sessions", s.cfg.MaxSessions,
		"guardrails", s.guard.Enabled(), "replica", s.presence.Self(), "replicas", len(s.presence.Live()))
	<-ctx.Done()

	// Leave first: the other replicas stop handing calls over to this one
	// and make them themselves.
	leave()
	<-presenceDone
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancel()
	err = svc.Stop(grace)
	stopWatch()
	<-watchDone
	<-sweepDone
	s.stdio.closeAll()
	s.remote.closeAll()
	_ = s.deps.Audit.Close(grace)
	s.log.Info("toolcall service stopped")
	return err
}

// Ready reports whether Run serves requests.
func (s *Service) Ready() bool { return s.ready.Load() }

// Replicas returns the ids of the live toolcall replicas as this one sees
// them, sorted, and this replica's own id.
func (s *Service) Replicas() (live []string, self string) {
	return s.presence.Live(), s.presence.Self()
}

// onStateChange drops what a new generation or config invalidates. A new
// generation (a cache reset) drops the catalogs and chains this replica
// cached but keeps every session: a healthy upstream session stays, calls
// in flight go on, and a session whose process died is replaced by its
// next call anyway. A config change retires only the sessions of servers
// whose definition changed (or that were disabled or removed): each is
// closed once its calls in flight have returned, and the next call opens a
// session on the new definition.
func (s *Service) onStateChange(prev, next sharedstate.Snapshot) {
	s.metrics.Generation.Set(float64(next.Generation))
	if next.Generation > prev.Generation {
		s.log.Info("cache generation changed; catalogs dropped, sessions kept", observability.KeyGen, next.Generation)
		s.resolver.invalidate()
		s.personal.invalidateAll()
		s.chains.reset()
	}
	if next.Extensions != prev.Extensions {
		s.resolver.invalidate()
		// Chains are rebuilt per server when its config or the interceptor
		// list changes (chainFor compares fingerprints); unchanged servers
		// keep their instances.
		s.chains.prune(func(name string) bool {
			srv := serverOf(next.Extensions, name)
			return srv == nil || !srv.Enabled
		})
		s.RetireChanged(prev.Extensions, next.Extensions)
	}
}

// RetireChanged retires the pooled sessions of the deployment servers whose
// definition differs between prev and next (changed, disabled or removed):
// each closes once its calls in flight have returned. Sessions of unchanged
// servers and personal connections (closed by their own events) stay. It
// returns how many sessions it retired. A config change applies it; a
// caller that learns of a change another way may call it too.
func (s *Service) RetireChanged(prev, next *config.Extensions) int {
	changed := func(k sessionKey) bool {
		if k.owner != "" {
			return false // personal: closed by personal connection events
		}
		srv, old := serverOf(next, k.server), serverOf(prev, k.server)
		return srv == nil || !srv.Enabled || old == nil || srv.Fingerprint != old.Fingerprint
	}
	n := s.stdio.retireWhere(changed) + s.remote.retireWhere(changed)
	if n > 0 {
		s.log.Info("sessions of changed MCP servers retired", "retired", n)
	}
	return n
}

// serverOf is ext.Server(name), nil when there is no config.
func serverOf(ext *config.Extensions, name string) *config.Server {
	if ext == nil {
		return nil
	}
	return ext.Server(name)
}

// warnOnceFor logs msg once per key for the life of the service.
func (s *Service) warnOnceFor(key, msg string, attrs ...any) {
	if _, loaded := s.warnOnce.LoadOrStore(key, true); !loaded {
		s.log.Warn(msg, attrs...)
	}
}
