package tokens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/egress"
	"github.com/mcpbus/mcpbus/pkg/flight"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/replica"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Config is the tokens service's configuration (plain data).
type Config struct {
	// MultiInstance is deployment.multi_instance: with an enabled
	// refresh_token server and no usable credentials key, Run refuses to
	// start.
	MultiInstance bool
	// StopTimeout bounds the wait for in-flight requests on shutdown
	// (shutdown.drain_seconds). Defaults to 10s.
	StopTimeout time.Duration
	// LeaseTTL is the refresh lease; the holder renews it every third of
	// it while the token request runs. Defaults to 30s.
	LeaseTTL time.Duration
	// AbandonAfter bounds one token request of the refresh_token grant
	// under the lease. Defaults to 120s.
	AbandonAfter time.Duration
	// HTTPTimeout bounds connecting to a token endpoint and waiting for its
	// response headers. Defaults to 15s.
	HTTPTimeout time.Duration
	// StoreRetryInterval is how often tokens that could not be stored are
	// stored again. Defaults to 3s.
	StoreRetryInterval time.Duration
	// PollInterval is how often a replica waiting for another replica's
	// refresh re-reads the row. Defaults to 200ms.
	PollInterval time.Duration
	// ConfigWait is how long a request whose config fingerprint differs
	// from this service's waits for the shared config to catch up.
	// Defaults to 3s.
	ConfigWait time.Duration
	// EgressAllow is config.yaml's egress.allow: what the token_url of a
	// personal connection may reach although it is internal. Default none.
	EgressAllow []string
	// PublicURL is api.public_url: connect-your-account redirects to
	// <PublicURL>/oauth/callback. Empty: connecting is refused.
	PublicURL string
	// ClientIDURL is the client ID used where authorization servers
	// support client ID metadata documents (api.oauth_client_id_url, by
	// default <PublicURL>/oauth/client-metadata.json).
	ClientIDURL string
	// FlowTTL is how long an authorization flow may take from its link to
	// the callback. Defaults to 10 minutes.
	FlowTTL time.Duration
	// Replicas is nats.replicas for the OAuth buckets (0: auto).
	Replicas int
}

// ConfigFrom maps config.yaml onto the Config.
func ConfigFrom(s *config.Settings) Config {
	return Config{MultiInstance: s.Deployment.MultiInstance, EgressAllow: s.Egress.Allow,
		StopTimeout: time.Duration(s.Shutdown.DrainSeconds) * time.Second,
		PublicURL:   s.API.PublicURL, ClientIDURL: s.API.ClientIDURL(), Replicas: int(s.NATS.Replicas)}
}

// SealerFrom loads the credentials key of env for Deps.Sealer and
// Deps.KeyProblem: no key gives neither, a malformed one the problem (never
// the key).
func SealerFrom(env config.Env) (*crypto.Sealer, string) {
	sealer, err := crypto.FromEnv(env)
	switch {
	case err == nil:
		return sealer, ""
	case errors.Is(err, crypto.ErrNoKey):
		return nil, ""
	default:
		return nil, err.Error()
	}
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.StopTimeout, 10*time.Second)
	def(&c.LeaseTTL, 30*time.Second)
	def(&c.AbandonAfter, 120*time.Second)
	def(&c.HTTPTimeout, 15*time.Second)
	def(&c.StoreRetryInterval, 3*time.Second)
	def(&c.PollInterval, 200*time.Millisecond)
	def(&c.ConfigWait, 3*time.Second)
	def(&c.FlowTTL, 10*time.Minute)
	return c
}

// Deps are the tokens service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	// Names are the deployment's subjects, buckets and stream (the
	// zero value: the default namespace).
	Names bus.Names
	// KV is the shared bucket; the service follows the extensions config
	// there. Required.
	KV jetstream.KeyValue
	// LocalExtensions is used until the KV bucket holds a config (may be nil).
	LocalExtensions *config.Extensions
	// Store is the database; required (pinged at start).
	Store store.Pinger
	// Tokens keeps refresh-token chains. nil (the memory backend) keeps
	// tokens in this process only.
	Tokens store.TokenStore
	// Sealer encrypts stored tokens. nil (no credentials key) keeps tokens
	// in this process only.
	Sealer *crypto.Sealer
	// KeyProblem says why Sealer is nil when a key was set but could not be
	// loaded ("" otherwise); it is reported at start, never the key.
	KeyProblem string
	// Clock is the clock for access-token expiry and authorization flows.
	// Defaults to time.Now.
	Clock func() time.Time
	// HTTPClient posts to token endpoints. Defaults to a client with
	// Config.HTTPTimeout bounds.
	HTTPClient *http.Client
	// InstanceID names this replica as lease owner: the process's replica
	// id (bootstrap.Runtime.ReplicaID). Defaults to a new replica.NewID.
	InstanceID string
	// Audit records connection changes (connect, refresh, needs_auth,
	// disconnect). nil writes nothing.
	Audit *audit.Writer
	// Metrics are the service's Prometheus metrics (metrics.NewTokens on
	// the process's registry). Defaults to metrics on a registry of their
	// own.
	Metrics *metrics.Tokens
}

// Service is the tokens service.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	watcher *sharedstate.Watcher
	http    *http.Client
	// egress guards personal connections' token_url; personalHTTP is the
	// token client that connects through it.
	egress       *egress.Policy
	personalHTTP *http.Client

	base     context.Context // cancelled when Run returns: background work
	stopBase context.CancelFunc
	bg       sync.WaitGroup // store retries, row deletions
	// flights are the token acquisitions in flight, one per connection
	// (memKey), shared by its concurrent callers.
	flights flight.Group[string, *accessToken]

	mu    sync.Mutex
	conns map[string]*conn

	// oauthKV and statesKV hold connected accounts and flows in progress
	// (set by Run).
	oauthKV, statesKV jetstream.KeyValue
}

// New validates the dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.Store == nil || deps.KV == nil {
		return nil, errors.New("tokens: NC, KV and Store are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.NewTokens(nil)
	}
	cfg = cfg.withDefaults()
	if deps.HTTPClient == nil {
		deps.HTTPClient = newTokenHTTPClient(cfg.HTTPTimeout)
	}
	if deps.InstanceID == "" {
		deps.InstanceID = replica.NewID()
	}
	log := observability.ForService(deps.Log, "tokens")
	policy, err := egress.New(cfg.EgressAllow, log)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	base, stop := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, deps: deps, log: log, http: deps.HTTPClient, base: base, stopBase: stop, conns: map[string]*conn{},
		egress: policy, personalHTTP: newPersonalTokenHTTPClient(cfg.HTTPTimeout, policy)}
	s.watcher = sharedstate.NewWatcher(deps.KV, deps.LocalExtensions, log)
	s.watcher.FollowReconnects(deps.NC)
	return s, nil
}

// persistent reports whether refresh-token chains go to the database.
func (s *Service) persistent() bool { return s.deps.Tokens != nil && s.deps.Sealer != nil }

// Run checks the database, follows the shared config, refuses a
// multi-instance deployment without a credentials key, registers and
// serves until ctx is cancelled.
func (s *Service) Run(ctx context.Context) error {
	defer s.stopBase()
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := s.deps.Store.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("tokens: database: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	s.watcher.OnChange(s.configChanged)
	watchDone, err := s.watcher.Start(watchCtx)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if err := s.startupCheck(s.watcher.Current().Extensions); err != nil {
		stopWatch()
		<-watchDone
		return err
	}
	switch {
	case s.persistent():
		s.log.Info("refresh-token chains are stored encrypted in the database")
	case s.deps.KeyProblem != "":
		s.log.Warn("the credentials key cannot be loaded; OAuth tokens stay in this process's memory", "problem", s.deps.KeyProblem)
	default:
		s.log.Info("OAuth tokens stay in this process's memory (memory backend or no credentials key)")
	}

	svc, err := microsvc.Register(s.deps.NC, s.deps.Names, bus.ServiceTokens, "OAuth custody: client_credentials and refresh_token grants, the encrypted refresh-token chain shared by replicas", s.log)
	if err != nil {
		stopWatch()
		<-watchDone
		return err
	}
	if err := s.openConnectBuckets(ctx); err != nil {
		_ = svc.Stop(context.Background())
		stopWatch()
		<-watchDone
		return err
	}
	for _, h := range []error{
		microsvc.Handle(svc, "token", s.deps.Names.InternalToken(), s.handleToken),
		microsvc.Handle(svc, "oauth-authorize", s.deps.Names.InternalOAuthAuthorize(), s.handleAuthorize),
		microsvc.Handle(svc, "oauth-callback", s.deps.Names.InternalOAuthCallback(), s.handleCallback),
		microsvc.Handle(svc, "oauth-connections", s.deps.Names.InternalOAuthConnections(), s.handleConnections),
		microsvc.Handle(svc, "oauth-disconnect", s.deps.Names.InternalOAuthDisconnect(), s.handleDisconnect),
		microsvc.Handle(svc, "oauth-account-states", s.deps.Names.InternalOAuthAccountStates(), s.handleAccountStates),
	} {
		if h != nil {
			_ = svc.Stop(context.Background())
			stopWatch()
			<-watchDone
			return h
		}
	}
	svc.SetReady(true)
	s.log.Info("tokens service started")
	<-ctx.Done()

	grace, cancelGrace := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancelGrace()
	err = svc.Stop(grace)
	stopWatch()
	<-watchDone
	s.stopBase()
	s.flights.Wait()
	s.bg.Wait()
	_ = s.deps.Audit.Close(grace)
	s.log.Info("tokens service stopped")
	return err
}

// openConnectBuckets opens (creating) the connect-your-account buckets.
func (s *Service) openConnectBuckets(ctx context.Context) error {
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return fmt.Errorf("tokens: jetstream: %w", err)
	}
	if s.oauthKV, err = bus.OAuthKV(ctx, js, s.deps.Names, s.cfg.Replicas); err != nil {
		return fmt.Errorf("tokens: the OAuth bucket: %w", err)
	}
	if s.statesKV, err = bus.OAuthStatesKV(ctx, js, s.deps.Names, s.cfg.Replicas, s.cfg.FlowTTL); err != nil {
		return fmt.Errorf("tokens: the OAuth states bucket: %w", err)
	}
	return nil
}

// startupCheck refuses a declared multi-instance deployment with an enabled
// refresh_token server when no credentials key is usable.
func (s *Service) startupCheck(ext *config.Extensions) error {
	if !s.cfg.MultiInstance || s.deps.Sealer != nil || ext == nil {
		return nil
	}
	for _, srv := range ext.Enabled() {
		if srv.OAuthEnabled() && srv.OAuth.GrantType == config.GrantRefreshToken {
			why := "is not set"
			if s.deps.KeyProblem != "" {
				why = "cannot be loaded (" + s.deps.KeyProblem + ")"
			}
			return fmt.Errorf("tokens: deployment.multi_instance is true and MCP server '%s' uses the refresh_token OAuth grant, but the credentials key %s: set %s (or %s) to the same key on every instance (`mcpbus keygen` prints one) so replicas share the rotated refresh-token chain",
				srv.Name, why, config.EnvCredentialsKey, config.EnvDeerFlowCredentialsKey)
		}
	}
	return nil
}
