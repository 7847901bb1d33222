package toolcall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
)

// Config is the toolcall service's configuration (plain data).
type Config struct {
	// WorkspaceRoot holds thread workspaces for stdio servers without cwd.
	// Defaults to .mcpbus/workspace.
	WorkspaceRoot string
	// MaxSessions bounds the session pool. Defaults to 256.
	MaxSessions int
	// StopTimeout bounds the wait for in-flight calls on shutdown. Defaults to 30s.
	StopTimeout time.Duration
}

// Deps are the toolcall service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	KV  jetstream.KeyValue
	// LocalExtensions is used until the KV bucket holds a config (may be nil).
	LocalExtensions *config.Extensions
}

// Service is the toolcall service.
type Service struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	watcher  *sharedstate.Watcher
	resolver *resolver
	pool     *pool
}

// New validates the dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.KV == nil {
		return nil, errors.New("toolcall: NC and KV are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if cfg.WorkspaceRoot == "" {
		cfg.WorkspaceRoot = ".mcpbus/workspace"
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 256
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	log := observability.ForService(deps.Log, "toolcall")
	return &Service{
		cfg: cfg, deps: deps, log: log,
		watcher:  sharedstate.NewWatcher(deps.KV, deps.LocalExtensions, log),
		resolver: &resolver{nc: deps.NC},
		pool:     newPool(cfg.MaxSessions),
	}, nil
}

// Run serves until ctx is cancelled, then drains, closes every session and
// returns.
func (s *Service) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	s.watcher.OnChange(s.onStateChange)
	watchDone, err := s.watcher.Start(watchCtx)
	if err != nil {
		return fmt.Errorf("toolcall: %w", err)
	}
	sub, err := s.deps.NC.Subscribe(bus.SubjectEventsCatalog, func(*nats.Msg) { s.resolver.invalidate() })
	if err != nil {
		return fmt.Errorf("toolcall: subscribe %s: %w", bus.SubjectEventsCatalog, err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	svc, err := microsvc.Register(s.deps.NC, bus.ServiceToolcall, "tool calls: sessions, credentials, guardrails", s.log)
	if err != nil {
		return err
	}
	if err := microsvc.Handle(svc, "tools-call", bus.SubjectToolsCall, s.handleCall); err != nil {
		_ = svc.Stop(context.Background())
		return err
	}
	svc.SetReady(true)
	s.log.Info("toolcall service started", "workspace_root", s.cfg.WorkspaceRoot, "max_sessions", s.cfg.MaxSessions)
	<-ctx.Done()

	grace, cancel := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancel()
	err = svc.Stop(grace)
	stopWatch()
	<-watchDone
	s.pool.closeAll()
	s.log.Info("toolcall service stopped")
	return err
}

// onStateChange drops what a new generation or config invalidates.
func (s *Service) onStateChange(prev, next sharedstate.Snapshot) {
	if next.Generation > prev.Generation {
		s.log.Info("cache generation changed; closing every session", observability.KeyGen, next.Generation)
		s.resolver.invalidate()
		s.pool.closeWhere(func(sessionKey) bool { return true })
		return
	}
	if next.Extensions != prev.Extensions {
		s.resolver.invalidate()
		s.pool.closeWhere(func(k sessionKey) bool {
			srv := next.Extensions.Server(k.server)
			old := prev.Extensions.Server(k.server)
			return srv == nil || !srv.Enabled || old == nil || srv.Fingerprint != old.Fingerprint
		})
	}
}

// Spec builds the service from a process runtime (mains and `mcpbus serve`).
var Spec = bootstrap.Spec{Name: "toolcall", Build: func(rt *bootstrap.Runtime) (bootstrap.Runner, error) {
	return New(Config{WorkspaceRoot: rt.Settings.Workspace.Root, MaxSessions: rt.Settings.StdioPool.MaxSessions},
		Deps{Log: rt.Log, NC: rt.NC, KV: rt.KV, LocalExtensions: rt.Extensions})
}}
