package api

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/httpguard"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/quota"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/virtual"
	"github.com/mcpbus/mcpbus/services/api/internal/configedit"
	"github.com/mcpbus/mcpbus/services/api/internal/mcphttp"
)

// Config is the api service's configuration (plain data).
type Config struct {
	// Listen is the address to serve on. Defaults to 127.0.0.1:8001.
	Listen string
	// TLSCertFile and TLSKeyFile (api.tls.cert_file, key_file): with both
	// set the api serves HTTPS with that certificate, read again when the
	// files change; empty, plain HTTP (loopback, or behind a
	// TLS-terminating Ingress).
	TLSCertFile, TLSKeyFile string
	// Keys are the API keys; none means loopback only, every caller admin "default".
	Keys []config.APIKey
	// Virtual is config.yaml's virtual servers (virtual.go). The zero
	// value: none.
	Virtual config.VirtualSettings
	// MaxBodyBytes limits request bodies. Defaults to 1 MiB.
	MaxBodyBytes int64
	// ExtensionsPath is the config file this service owns and publishes ("" = none).
	ExtensionsPath string
	// PublicURL is api.public_url: the client ID metadata document names
	// <PublicURL>/oauth/callback as its redirect URI. "" serves none.
	PublicURL string
	// ClientIDURL is api.oauth_client_id_url (by default the document's
	// own URL): the client_id the document names.
	ClientIDURL string
	// RequestTimeout bounds a request's wait on the bus. Defaults to 120s.
	RequestTimeout time.Duration
	// StopTimeout bounds the wait for in-flight requests on shutdown
	// (shutdown.drain_seconds). Defaults to 15s.
	StopTimeout time.Duration
	// Personal is the personal stdio launch policy's options (see
	// launchpolicy.OptionsFrom); the zero value refuses personal stdio
	// connections. Keyed is taken from Keys.
	Personal launchpolicy.PersonalOptions
	// PublishInterval is how often the config file is checked for hand
	// edits. Defaults to 1s.
	PublishInterval time.Duration
	// ReadTimeout bounds reading a whole request, body included; a body
	// that never finishes is cut off. ReadHeaderTimeout bounds the headers,
	// IdleTimeout an idle keep-alive connection, MaxHeaderBytes the request
	// line and headers. Defaults: api.* of config.DefaultSettings (30s,
	// 10s, 120s, 64 KiB). No write timeout is set: streamed responses live
	// as long as they need and bus waits are bounded by RequestTimeout.
	ReadTimeout       time.Duration
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// AllowedOrigins are browser origins accepted besides the API's own
	// when there are no API keys (see package httpguard).
	AllowedOrigins []string
	// MaxPersonalPerUser caps one user's personal connections. Defaults to
	// personal_connections.max_per_user of config.DefaultSettings (20).
	MaxPersonalPerUser int
	// EgressAllow is config.yaml's egress.allow, which personal
	// connections' URLs are checked against on save. Default none.
	EgressAllow []string
	// MCP configures the aggregated MCP endpoint (mcp.go).
	MCP MCPConfig
	// ConsoleSessionTTL is how long a console sign-in lasts
	// (api.console.session_seconds). Defaults to 8h.
	ConsoleSessionTTL time.Duration
	// SignInFailures failed console sign-ins per client address in
	// SignInWindow are allowed (api.console.sign_in_failures and
	// sign_in_window_seconds). Default 10 in 15 minutes.
	SignInFailures int
	SignInWindow   time.Duration
}

// ConfigFrom maps config.yaml onto the Config. extensionsPath is the config
// file this service owns ("" = none).
func ConfigFrom(s *config.Settings, extensionsPath string) Config {
	a := s.API
	return Config{Listen: a.Listen, TLSCertFile: a.TLS.CertFile, TLSKeyFile: a.TLS.KeyFile, Keys: a.Keys, Virtual: s.Virtual(), MaxBodyBytes: a.MaxBodyBytes, ExtensionsPath: extensionsPath, PublicURL: a.PublicURL, ClientIDURL: a.ClientIDURL(),
		Personal:    launchpolicy.OptionsFrom(s),
		StopTimeout: seconds(s.Shutdown.DrainSeconds),
		ReadTimeout: seconds(a.ReadTimeoutSeconds), ReadHeaderTimeout: seconds(a.ReadHeaderTimeoutSeconds),
		IdleTimeout: seconds(a.IdleTimeoutSeconds), MaxHeaderBytes: a.MaxHeaderBytes, AllowedOrigins: a.AllowedOrigins,
		MaxPersonalPerUser: s.PersonalConnections.MaxPerUser, EgressAllow: s.Egress.Allow,
		ConsoleSessionTTL: seconds(a.Console.SessionSeconds),
		SignInFailures:    a.Console.SignInFailures, SignInWindow: seconds(a.Console.SignInWindowSeconds),
		MCP: MCPConfig{PageSize: a.MCP.PageSize, IdleTimeout: seconds(a.MCP.SessionIdleSeconds),
			MaxStreamsPerUser: a.MCP.MaxStreamsPerUser, MaxSessionsPerUser: a.MCP.MaxSessionsPerUser,
			SessionBucketMaxBytes: a.MCP.SessionBucketMaxBytes, SessionReplicas: int(s.NATS.Replicas),
			CatalogTTL: catalogTTL(a.MCP.CatalogTTLSeconds)}}
}

// catalogTTL maps api.mcp.catalog_ttl_seconds onto mcpserver's CatalogTTL,
// where zero means the default and a negative value means ttlMs 0.
func catalogTTL(n int) time.Duration {
	if n == 0 {
		return -1
	}
	return seconds(n)
}

// Deps are the api service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	// Names are the deployment's subjects, buckets and stream (the
	// zero value: the default namespace).
	Names bus.Names
	KV    jetstream.KeyValue
	// Store holds personal connections and their OAuth token rows. Optional:
	// without it the personal connection routes and mcpbus.internal.personal
	// answer 503 unavailable.
	Store store.Store
	// Sealer encrypts personal connection definitions at rest (the
	// credentials key). Without it, definitions carrying secret values are
	// refused.
	Sealer *crypto.Sealer
	// MCPSessions is the MCP session bucket (bus.MCPSessionsKV). Optional:
	// New opens or creates it on NC.
	MCPSessions jetstream.KeyValue
	// Metrics is the registry /metrics serves and the api's metrics are
	// registered on. Defaults to a registry of this Service's own.
	Metrics *prometheus.Registry
	// Audit writes a record per config change through the API (nil:
	// none). GET /api/mcp/audit reads the stream either way.
	Audit *audit.Writer
	// Clock is the api's clock: MCP sessions, request states and their
	// expiry. Defaults to time.Now.
	Clock func() time.Time
}

// Service is the api service.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	echo *echo.Echo
	auth *authenticator
	// virtual is the compiled virtual servers, config.yaml's and the
	// admin API's (virtual.go); watcher follows the latter.
	virtual *virtual.Live
	watcher *sharedstate.Watcher
	svc     *microsvc.Service

	personal *launchpolicy.Personal
	guard    httpguard.Guard
	metrics  *metrics
	openapi  map[string]any

	// pub publishes the config file (follows hand edits, publishes writes).
	pub *sharedstate.FilePublisher

	listener net.Listener

	// mcp is the aggregated MCP endpoint.
	mcp *mcphttp.Handler
	// drain refuses new HTTP requests once Run stops (drain.go).
	drain drainer
	// sessions is the console session bucket (session.go).
	sessions jetstream.KeyValue
	// signIns counts failed console sign-ins per client address in the
	// session bucket (signinlimit.go).
	signIns *quota.Counter
}

// New validates the configuration and builds the HTTP router.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.KV == nil {
		return nil, errors.New("api: NC and KV are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8001"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 120 * time.Second
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 15 * time.Second
	}
	if cfg.PublishInterval <= 0 {
		cfg.PublishInterval = time.Second
	}
	if cfg.ConsoleSessionTTL <= 0 {
		cfg.ConsoleSessionTTL = 8 * time.Hour
	}
	if cfg.SignInFailures <= 0 {
		cfg.SignInFailures = 10
	}
	if cfg.SignInWindow <= 0 {
		cfg.SignInWindow = 15 * time.Minute
	}
	def := config.DefaultSettings()
	cfg.ReadTimeout = cmp.Or(max(cfg.ReadTimeout, 0), seconds(def.API.ReadTimeoutSeconds))
	cfg.ReadHeaderTimeout = cmp.Or(max(cfg.ReadHeaderTimeout, 0), seconds(def.API.ReadHeaderTimeoutSeconds))
	cfg.IdleTimeout = cmp.Or(max(cfg.IdleTimeout, 0), seconds(def.API.IdleTimeoutSeconds))
	cfg.MaxHeaderBytes = cmp.Or(max(cfg.MaxHeaderBytes, 0), def.API.MaxHeaderBytes)
	cfg.MaxPersonalPerUser = cmp.Or(max(cfg.MaxPersonalPerUser, 0), def.PersonalConnections.MaxPerUser)
	auth, err := newAuthenticator(cfg.Keys)
	if err != nil {
		return nil, err
	}
	cfg.Personal.Keyed = len(cfg.Keys) > 0
	personal, err := launchpolicy.NewPersonal(cfg.Personal)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := &Service{cfg: cfg, deps: deps, log: observability.ForService(deps.Log, "api"), auth: auth,
		virtual: virtual.NewLive(cfg.Virtual), personal: personal, metrics: newMetrics(deps.Metrics), openapi: openAPIDocument(),
		guard: httpguard.Guard{Loopback: len(cfg.Keys) == 0, AllowedOrigins: cfg.AllowedOrigins}}
	if cfg.ExtensionsPath != "" {
		s.pub = &sharedstate.FilePublisher{KV: deps.KV, Path: cfg.ExtensionsPath, Interval: cfg.PublishInterval, Log: s.log}
	}
	if s.mcp, err = s.newMCP(); err != nil {
		return nil, err
	}
	if len(cfg.Keys) > 0 {
		if s.sessions, err = s.openSessions(); err != nil {
			return nil, err
		}
		s.signIns = quota.New(s.sessions, s.now)
	}
	s.echo = s.routes()
	return s, nil
}

// Handler exposes the router (tests).
func (s *Service) Handler() http.Handler { return s.echo }

// Addr is the bound address once Run has started listening.
func (s *Service) Addr() string {
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// Listen binds the address (Run calls it when not done yet). With no API
// keys the address must be loopback.
func (s *Service) Listen() error {
	if s.listener != nil {
		return nil
	}
	if len(s.cfg.Keys) == 0 {
		if err := requireLoopback(s.cfg.Listen); err != nil {
			return err
		}
	}
	var certs *certFiles
	if s.cfg.TLSCertFile != "" || s.cfg.TLSKeyFile != "" {
		var err error
		if certs, err = newCertFiles(s.cfg.TLSCertFile, s.cfg.TLSKeyFile); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", s.cfg.Listen, err)
	}
	if certs != nil {
		ln = tls.NewListener(ln, certs.config())
	}
	s.listener = ln
	return nil
}

// Run publishes the config, serves HTTP until ctx is cancelled and shuts
// down gracefully.
func (s *Service) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	pubDone := make(chan struct{})
	if s.pub != nil {
		if _, err := s.publish(ctx, true); err != nil {
			return fmt.Errorf("api: publish extensions config: %w", err)
		}
		s.log.Info("extensions config published", "path", s.cfg.ExtensionsPath)
		if why := configedit.Writable(s.cfg.ExtensionsPath); why != "" {
			s.log.Warn("the config API is read-only: PUT and PATCH /api/mcp/config answer 409; change the file where it comes from",
				"path", s.cfg.ExtensionsPath, "reason", why)
		}
		go func() { defer close(pubDone); s.pub.Run(bg) }()
	} else {
		close(pubDone)
	}

	watchDone, err := s.followVirtual(bg)
	if err != nil {
		stopBG()
		<-pubDone
		return err
	}
	defer func() { stopBG(); <-watchDone }()
	svc, err := microsvc.Register(s.deps.NC, s.deps.Names, bus.ServiceAPI, "REST API for the agent UI", s.log)
	if err != nil {
		return err
	}
	s.svc = svc
	err = microsvc.Handle(svc, "personal", s.deps.Names.InternalPersonal(), s.personalServers)
	if err == nil {
		err = s.mcp.Listen() // list_changed for the MCP endpoint's streams
	}
	if err != nil {
		stopBG()
		<-pubDone
		_ = s.mcp.Close(context.Background())
		_ = svc.Stop(context.Background())
		return err
	}
	if len(s.cfg.Keys) == 0 {
		s.log.Warn("no API keys configured: listening on loopback only and treating every caller as the admin user 'default'")
	}
	srv := &http.Server{Handler: s.echo, ReadTimeout: s.cfg.ReadTimeout, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout: s.cfg.IdleTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(s.listener) }()
	svc.SetReady(true)
	s.log.Info("api service started", "listen", s.Addr(), "tls", s.cfg.TLSCertFile != "")

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			stopBG()
			<-pubDone
			_ = svc.Stop(context.Background())
			return fmt.Errorf("api: serve: %w", err)
		}
	}
	// Phase one, stop accepting: readiness goes false, new HTTP requests
	// get 503 unavailable, the micro endpoints drain. Phase two: the
	// requests in flight finish (open MCP streams are ended first, since
	// they never would), up to StopTimeout; then the server closes.
	svc.SetReady(false)
	s.drain.close()
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancel()
	stopErr := svc.Stop(grace)
	closeErr := s.mcp.Close(grace)
	s.drain.wait(grace)
	err = errors.Join(stopErr, closeErr, srv.Shutdown(grace), s.deps.Audit.Close(grace))
	stopBG()
	<-pubDone
	s.log.Info("api service stopped")
	return err
}

func requireLoopback(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("api: listen address %q: %w", addr, err)
	}
	if !httpguard.LoopbackHost(addr) {
		return fmt.Errorf("api: no API keys are configured, so api.listen must be a loopback address, got %q", addr)
	}
	return nil
}

// seconds converts a config.yaml number of seconds.
func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// routes builds the router.
func (s *Service) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.trace)
	e.Use(s.observe)
	e.Use(middleware.Recover())
	e.Use(s.drainGuard)
	e.Use(s.browserGuard)
	e.Use(middleware.BodyLimit(fmt.Sprint(s.cfg.MaxBodyBytes) + "B"))
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	// With API keys set, /metrics takes an admin key (Prometheus without
	// one scrapes a serve process's metrics_listen instead) and the OpenAPI
	// document any valid key; without keys the api is loopback-only and
	// both are open, as every route is.
	e.GET("/metrics", s.metricsHandler(), s.authenticate, requireAdmin)
	e.GET("/api/openapi.json", s.openAPI, s.authenticate)
	g := e.Group("/api", s.authenticate)
	g.GET("/mcp/tools", s.listTools)
	g.POST("/mcp/tools/:name/call", s.callTool)
	g.GET("/mcp/resources", s.listResources)
	g.POST("/mcp/resources/read", s.readResource)
	g.GET("/mcp/prompts", s.listPrompts)
	g.GET("/mcp/prompts/:name", s.describePrompt)
	g.POST("/mcp/prompts/:name", s.getPrompt)
	g.POST("/mcp/completion", s.complete)
	g.POST("/mcp/cache/reset", s.resetCache, requireAdmin)
	g.GET("/mcp/servers", s.listServers, requireAdmin)
	s.virtualRoutes(g)
	s.taskRoutes(g)
	s.configRoutes(g)
	s.auditRoutes(g)
	s.pinRoutes(g)
	s.personalRoutes(g)
	s.connectRoutes(e, g)
	s.mcpRoutes(e)
	s.sessionRoutes(e)
	s.consoleRoutes(e)
	return e
}
