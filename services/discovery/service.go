package discovery

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

// Config is the discovery service's configuration (plain data).
type Config struct {
	// ToolSearch controls deferral of MCP tool schemas.
	ToolSearch config.ToolSearch
	// StopTimeout bounds the wait for in-flight requests on shutdown.
	// Defaults to 10s.
	StopTimeout time.Duration
}

// Deps are the discovery service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	JS  jetstream.JetStream
	KV  jetstream.KeyValue
	// LocalExtensions is used until the KV bucket holds a config (may be nil).
	LocalExtensions *config.Extensions
}

// Service is the discovery service.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	watcher *sharedstate.Watcher
	cache   *cache
}

// New validates the dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.JS == nil || deps.KV == nil {
		return nil, errors.New("discovery: NC, JS and KV are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	log := observability.ForService(deps.Log, "discovery")
	s := &Service{cfg: cfg, deps: deps, log: log}
	s.watcher = sharedstate.NewWatcher(deps.KV, deps.LocalExtensions, log)
	s.cache = newCache(log, s.publishCatalogEvent)
	return s, nil
}

// Run serves until ctx is cancelled, then drains and returns nil.
func (s *Service) Run(ctx context.Context) error {
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	s.watcher.OnChange(func(prev, next sharedstate.Snapshot) {
		if next.Generation > prev.Generation {
			s.log.Info("cache generation changed; dropping the tool cache", observability.KeyGen, next.Generation)
			s.cache.reset(next.Generation)
		}
	})
	watchDone, err := s.watcher.Start(watchCtx)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	s.cache.reset(s.watcher.Current().Generation)

	svc, err := microsvc.Register(s.deps.NC, bus.ServiceDiscovery, "tool catalog: discovery, cache, names", s.log)
	if err != nil {
		return err
	}
	if err := errors.Join(
		microsvc.Handle(svc, "tools-list", bus.SubjectToolsList, s.handleList),
		microsvc.Handle(svc, "catalog", bus.SubjectInternalCatalog, s.handleCatalog),
		microsvc.Handle(svc, "cache-reset", bus.SubjectCacheReset, s.handleReset),
	); err != nil {
		_ = svc.Stop(context.Background())
		return err
	}
	svc.SetReady(true)
	s.log.Info("discovery service started")
	<-ctx.Done()

	grace, cancel := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancel()
	err = svc.Stop(grace)
	stopWatch()
	<-watchDone
	s.cache.wait()
	s.log.Info("discovery service stopped")
	return err
}

func (s *Service) handleList(ctx context.Context, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	cat, err := s.catalog(ctx)
	if err != nil {
		return bus.ToolsListReply{}, err
	}
	return cat.reply(req, s.cfg.ToolSearch), nil
}

func (s *Service) handleCatalog(ctx context.Context, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	cat, err := s.catalog(ctx)
	if err != nil {
		return bus.ToolsListReply{}, err
	}
	return cat.full(), nil
}

func (s *Service) catalog(ctx context.Context) (*catalog, error) {
	snap := s.watcher.Current()
	return s.cache.get(ctx, snap)
}

const resetMessage = "MCP tools cache reset. Tools will reload on next use."

func (s *Service) handleReset(ctx context.Context, req bus.CacheResetRequest) (bus.CacheResetReply, error) {
	gen, err := bus.BumpGeneration(ctx, s.deps.KV)
	if err != nil {
		// The bucket cannot be written: reset this process only and say so.
		s.log.Warn("cannot publish the cache generation; resetting this process only", observability.Err(err))
		local := s.watcher.Current().Generation + 1
		s.watcher.SetLocalGeneration(local)
		return bus.CacheResetReply{Success: true, Message: resetMessage, Scope: "process", Generation: local}, nil
	}
	s.log.Info("cache reset requested", observability.KeyGen, gen, "reason", req.Reason)
	return bus.CacheResetReply{Success: true, Message: resetMessage, Scope: "shared_config", Generation: gen}, nil
}

func (s *Service) publishCatalogEvent(gen int64, hash string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body := fmt.Appendf(nil, `{"generation":%d,"catalog_hash":%q}`, gen, hash)
	if _, err := s.deps.JS.Publish(ctx, bus.SubjectEventsCatalog, body); err != nil {
		s.log.Warn("cannot publish catalog event", observability.Err(err))
	}
}

// Spec builds the service from a process runtime (mains and `mcpbus serve`).
var Spec = bootstrap.Spec{Name: "discovery", Build: func(rt *bootstrap.Runtime) (bootstrap.Runner, error) {
	return New(Config{ToolSearch: rt.Settings.ToolSearch},
		Deps{Log: rt.Log, NC: rt.NC, JS: rt.JS, KV: rt.KV, LocalExtensions: rt.Extensions})
}}
