package discovery

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

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/coalesce"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/egress"
	"github.com/mcpbus/mcpbus/pkg/guardrails"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/pinning"
	"github.com/mcpbus/mcpbus/pkg/replica"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tokenclient"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Config is the discovery service's configuration (plain data).
type Config struct {
	// ToolSearch controls deferral of MCP tool schemas and auto-promotion.
	ToolSearch config.ToolSearch
	// StopTimeout bounds the wait for in-flight requests on shutdown
	// (shutdown.drain_seconds). Defaults to 10s.
	StopTimeout time.Duration
	// NoWarmUp disables the background lookup after start, a config change
	// and a cache reset; discovery then happens on the first request only.
	NoWarmUp bool
	// PersonalTimeout bounds one read of a user's personal connections
	// from the api (mcpbus.internal.personal). Defaults to 5s.
	PersonalTimeout time.Duration
	// PersonalTTL is how long a user's personal connections are reused
	// without a change event (mcpbus.events.personal.<user>), in case an
	// event was missed. Defaults to 5m.
	PersonalTTL time.Duration
	// PersonalIdle forgets a user (their connections and discoveries) who
	// has not looked up the catalog for this long. Defaults to 30m.
	PersonalIdle time.Duration
	// Personal is the personal stdio launch policy's options
	// (launchpolicy.OptionsFrom), applied before a personal stdio server is
	// started for discovery. The zero value refuses them.
	Personal launchpolicy.PersonalOptions
	// RetryInitial is how long a deployment server that failed discovery
	// stays failed before a lookup retries it; each consecutive failure
	// doubles the wait, up to RetryMax. Defaults to 5s (config.yaml
	// discovery.retry_initial_seconds).
	RetryInitial time.Duration
	// RetryMax caps the wait between retries of a failed server. Defaults
	// to 5m (discovery.retry_max_seconds).
	RetryMax time.Duration
	// Upstream is the egress allowlist and timeout maxima of personal
	// connections and the response cap of every server. The zero value
	// allows no internal address and uses the default maxima and cap.
	Upstream config.Upstream
	// AckWait bounds how long a cache reset waits, after the new
	// generation is written, for the live replicas to acknowledge it (the
	// reply counts those that did). Defaults to 2s.
	AckWait time.Duration
	// Guardrails leave a denied server's resources and templates, and
	// denied prompts, out of the federated lists (federation.go).
	Guardrails config.Guardrails
	// Pinning is the tool pinning policy defaults (config.yaml pinning);
	// the zero value pins nothing.
	Pinning config.PinningSettings
	// Virtual is config.yaml's virtual servers and the NATS identities
	// bound to them (virtual.go). The zero value: none.
	Virtual config.VirtualSettings
}

// ConfigFrom maps config.yaml onto the Config; busMaxPayload is the NATS
// connection's MaxPayload (the response cap follows it).
func ConfigFrom(s *config.Settings, busMaxPayload int64) Config {
	return Config{ToolSearch: s.ToolSearch, Personal: launchpolicy.OptionsFrom(s),
		StopTimeout:  time.Duration(s.Shutdown.DrainSeconds) * time.Second,
		RetryInitial: time.Duration(s.Discovery.RetryInitialSeconds) * time.Second,
		RetryMax:     time.Duration(s.Discovery.RetryMaxSeconds) * time.Second,
		Upstream:     s.Upstream(busMaxPayload), Guardrails: s.Guardrails, Pinning: s.Pinning, Virtual: s.Virtual()}
}

// withDefaults fills the fields left zero.
func (c Config) withDefaults() Config {
	if c.StopTimeout <= 0 {
		c.StopTimeout = 10 * time.Second
	}
	c.PersonalTimeout = cmp.Or(c.PersonalTimeout, 5*time.Second)
	c.PersonalTTL = cmp.Or(c.PersonalTTL, 5*time.Minute)
	c.PersonalIdle = cmp.Or(c.PersonalIdle, 30*time.Minute)
	c.RetryInitial = cmp.Or(c.RetryInitial, 5*time.Second)
	c.RetryMax = cmp.Or(c.RetryMax, 5*time.Minute)
	c.AckWait = cmp.Or(c.AckWait, 2*time.Second)
	return c
}

// validate refuses negative durations and a RetryMax below RetryInitial.
func (c Config) validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"PersonalTimeout", c.PersonalTimeout}, {"PersonalTTL", c.PersonalTTL}, {"PersonalIdle", c.PersonalIdle},
		{"RetryInitial", c.RetryInitial}, {"RetryMax", c.RetryMax}, {"AckWait", c.AckWait}} {
		if f.d < 0 {
			return fmt.Errorf("discovery: %s must not be negative, got %s", f.name, f.d)
		}
	}
	if c.RetryMax < c.RetryInitial {
		return fmt.Errorf("discovery: RetryMax (%s) must not be below RetryInitial (%s)", c.RetryMax, c.RetryInitial)
	}
	return nil
}

// Deps are the discovery service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	// Names are the deployment's subjects, buckets and stream (the
	// zero value: the default namespace).
	Names bus.Names
	JS    jetstream.JetStream
	KV    jetstream.KeyValue
	// PresenceKV is the presence bucket (bus.PresenceKV), where every
	// replica acknowledges the cache generation it applied and a cache
	// reset counts the acknowledgements. Nil: this replica acknowledges
	// nothing and a reset's reply counts none.
	PresenceKV jetstream.KeyValue
	// ReplicaID names this replica in its acknowledgements
	// (bootstrap.Runtime.ReplicaID). Defaults to a new replica.NewID.
	ReplicaID string
	// LocalExtensions is used until the KV bucket holds a config (may be nil).
	LocalExtensions *config.Extensions
	// Tokens gives OAuth headers for servers with oauth enabled. Defaults
	// to a tokenclient on NC (the tokens service on mcpbus.internal.token).
	Tokens TokenSource
	// Clock decides when a failed server is due for a retry and stamps
	// discoveries. Defaults to time.Now.
	Clock func() time.Time
	// Pins is the tool pinning state (store.Store.Pins). Nil: a server
	// whose policy is require_approval or block fails discovery, one under
	// log is served unrecorded.
	Pins store.PinStore
	// Metrics are the service's Prometheus metrics (metrics.NewDiscovery
	// on the process's registry). Defaults to metrics on a registry of
	// their own.
	Metrics *metrics.Discovery
}

// Service is the discovery service.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	watcher *sharedstate.Watcher
	guard   *driftGuard
	// rails are the guardrails the federated lists apply.
	rails *guardrails.Guard
	cache *cache
	// virtual is the compiled virtual servers, config.yaml's and the
	// admin API's (virtual.go).
	virtual *virtual.Live

	// events tracks catalog event publications in flight.
	events sync.WaitGroup
	// rediscoverer runs the rediscoveries after upstreams' list_changed
	// (rediscover.go).
	rediscoverer *coalesce.Group[rediscoverKey]
	// started is set once Run has applied the replayed shared state; only
	// changes after that warm the cache.
	started atomic.Bool
}

// New validates the dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.JS == nil || deps.KV == nil {
		return nil, errors.New("discovery: NC, JS and KV are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if deps.Tokens == nil {
		deps.Tokens = tokenclient.New(deps.NC, deps.Names)
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	if deps.ReplicaID == "" {
		deps.ReplicaID = replica.NewID()
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.NewDiscovery(nil)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	personal, err := launchpolicy.NewPersonal(cfg.Personal)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	log := observability.ForService(deps.Log, "discovery")
	rails, err := guardrails.New(cfg.Guardrails, deps.NC, log)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	s := &Service{cfg: cfg, deps: deps, log: log, guard: &driftGuard{}, rails: rails, virtual: virtual.NewLive(cfg.Virtual)}
	s.watcher = sharedstate.NewWatcher(deps.KV, deps.LocalExtensions, log)
	s.watcher.FollowReconnects(deps.NC)
	if deps.PresenceKV != nil {
		s.watcher.AckTo(deps.PresenceKV, "discovery", deps.ReplicaID)
	}
	policy, err := egress.New(cfg.Upstream.Egress.Allow, log)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	d := &discoverer{log: log, tokens: deps.Tokens, personal: personal, upstream: cfg.Upstream, egress: policy}
	s.cache = newCache(log, observeDiscovery(deps.Metrics, d.discover), cfg.ToolSearch, s.guard,
		func(cat *catalog) { s.publishCatalogEvent(cat, "") }, s.askPersonal,
		personalConfig{timeout: cfg.PersonalTimeout, ttl: cfg.PersonalTTL, idle: cfg.PersonalIdle},
		retryPolicy{initial: cfg.RetryInitial, max: cfg.RetryMax}, deps.Clock)
	s.cache.fetchStates = s.askAccountStates
	s.cache.onReady = s.publishCatalogEvent
	s.cache.pin = (&pinner{settings: cfg.Pinning, metrics: deps.Metrics, engine: &pinning.Engine{
		Store: deps.Pins, AutoApproveDescriptive: cfg.Pinning.AutoApproveDescriptive, Log: log}}).apply
	s.rediscoverer = s.newRediscoverer()
	return s, nil
}

// Run serves until ctx is cancelled, then drains and returns nil.
func (s *Service) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	defer s.cache.close()
	s.watcher.OnChange(func(_, next sharedstate.Snapshot) { s.virtual.Apply(next.VirtualRevision, next.VirtualServers) })
	s.watcher.OnChange(s.onSharedChange)
	watchDone, err := s.watcher.Start(watchCtx)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	snap := s.watcher.Current()
	// A config published while this decides becomes the snapshot when
	// there was none before.
	s.guard.await()
	if base := s.startupConfig(ctx, snap.Extensions); base != nil {
		s.guard.start(base)
	}
	s.cache.observe(snap.Generation)
	// Personal connection changes: a core subscription (a missed event is
	// covered by PersonalTTL), in place before the service is ready.
	personalSub, err := s.deps.NC.Subscribe(s.deps.Names.PersonalEventsAll(), s.onPersonalEvent)
	if err != nil {
		return fmt.Errorf("discovery: subscribe to personal connection events: %w", err)
	}
	defer func() { _ = personalSub.Unsubscribe() }()
	// Pin decisions: every replica discovers the server again.
	pinSub, err := s.deps.NC.Subscribe(s.deps.Names.PinEvents(), s.onPinEvent)
	if err != nil {
		return fmt.Errorf("discovery: subscribe to pin events: %w", err)
	}
	defer func() { _ = pinSub.Unsubscribe() }()
	// Upstreams' list_changed, from toolcall (rediscover.go).
	rediscoverSub, err := s.deps.NC.Subscribe(s.deps.Names.InternalRediscover(), s.onRediscover)
	if err != nil {
		return fmt.Errorf("discovery: subscribe to rediscovery requests: %w", err)
	}
	defer func() { _ = rediscoverSub.Unsubscribe() }()
	defer s.rediscoverer.Close()
	if err := s.deps.NC.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("discovery: subscribe to personal connection events: %w", err)
	}

	svc, err := microsvc.Register(s.deps.NC, s.deps.Names, bus.ServiceDiscovery, "tool catalog: discovery, cache, names, routing, tool_search", s.log)
	if err != nil {
		return err
	}
	reqCtx, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	var reqs sync.WaitGroup
	if err := s.register(svc, reqCtx, &reqs); err != nil {
		_ = svc.Stop(context.Background())
		return err
	}
	svc.SetReady(true)
	s.log.Info("discovery service started", observability.KeyGen, s.watcher.Current().Generation)
	// Changes replayed while the watcher started (config, then generation)
	// are applied without warming; one warm-up follows, in the generation
	// in force, so a late replica discovers once.
	s.started.Store(true)
	s.warm()
	<-ctx.Done()

	grace, cancel := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancel()
	err = svc.Stop(grace)
	waitUntil(&reqs, grace)
	cancelReqs()
	reqs.Wait()
	_ = personalSub.Unsubscribe()
	_ = rediscoverSub.Unsubscribe()
	s.rediscoverer.Close()
	stopWatch()
	<-watchDone
	s.cache.close()
	s.events.Wait()
	s.log.Info("discovery service stopped")
	return err
}

// register adds the endpoints. tools.list and the internal catalog answer
// a plain request from the published catalog's encoded reply without a
// goroutine or an encoding; anything else goes through bus.Handler.
// Requests run under base and are tracked by reqs.
func (s *Service) register(svc *microsvc.Service, base context.Context, reqs *sync.WaitGroup) error {
	list := bus.Handler(base, reqs, s.log, s.handleList)
	full := bus.Handler(base, reqs, s.log, s.handleCatalog)
	return errors.Join(
		svc.AddVerb("tools-list", bus.VerbToolsList, s.fast(list, agentListing)),
		svc.AddEndpoint("catalog", s.deps.Names.InternalCatalog(), s.fast(full, fullListing)),
		svc.AddVerb("tools-search", bus.VerbToolsSearch, bus.Handler(base, reqs, s.log, s.handleSearch)),
		svc.AddEndpoint("servers", s.deps.Names.InternalServers(), bus.Handler(base, reqs, s.log, s.handleServers)),
		svc.AddEndpoint("cache-reset", s.deps.Names.CacheReset(), bus.Handler(base, reqs, s.log, s.handleReset)),
		svc.AddVerb("resources-list", bus.VerbResourcesList, bus.Handler(base, reqs, s.log, s.handleResourcesList)),
		svc.AddVerb("resources-templates-list", bus.VerbResourceTemplatesList, bus.Handler(base, reqs, s.log, s.handleTemplatesList)),
		svc.AddVerb("prompts-list", bus.VerbPromptsList, bus.Handler(base, reqs, s.log, s.handlePromptsList)),
	)
}

// waitUntil waits for wg or until ctx is done.
func waitUntil(wg *sync.WaitGroup, ctx context.Context) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// startupConfig picks the drift guard's startup snapshot: the config file
// this process was started with when it is the file the shared config comes
// from (dev mode: the KV may still hold the previous run's version until
// the api publishes the file again), else the shared config. Nil means
// neither exists yet: the first config published becomes the snapshot.
func (s *Service) startupConfig(ctx context.Context, shared *config.Extensions) *config.Extensions {
	local := s.deps.LocalExtensions
	hasShared := s.hasSharedConfig(ctx)
	switch {
	case local != nil && local.Path != "" && (!hasShared || shared.Path == local.Path):
		return local
	case hasShared:
		return shared
	default:
		return nil
	}
}

// hasSharedConfig reports whether the KV bucket holds a config.
func (s *Service) hasSharedConfig(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.deps.KV.Get(ctx, bus.KVKeyConfig)
	return err == nil
}

// onSharedChange follows the KV: a newer generation drops the cache, a new
// published startup baseline (or, for records without one, the first
// shared config) is the drift guard's snapshot, and either change warms the
// cache.
func (s *Service) onSharedChange(prev, next sharedstate.Snapshot) {
	s.deps.Metrics.Generation.Set(float64(next.Generation))
	switch {
	case next.Baseline != nil && next.BaselineEpoch != prev.BaselineEpoch:
		s.guard.adopt(next.Baseline)
		s.log.Info("startup configuration adopted as the drift guard's baseline", "config_epoch", next.BaselineEpoch)
	case next.Extensions != prev.Extensions:
		s.guard.offer(next.Extensions)
	}
	if next.Generation > prev.Generation && s.cache.observe(next.Generation) {
		s.log.Info("cache generation changed; dropping the tool cache", observability.KeyGen, next.Generation)
	}
	if s.started.Load() {
		s.warm()
	}
}

func (s *Service) warm() {
	if !s.cfg.NoWarmUp {
		s.cache.warm(s.watcher.Current())
	}
}
