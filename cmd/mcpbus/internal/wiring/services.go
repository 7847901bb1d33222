// Package wiring is mcpbus's main wiring: it builds each service's Config
// and Deps from a bootstrap.Runtime and the database (the only place that
// does), runs one service (`mcpbus serve`), and runs the five in dependency
// order (`mcpbus dev`): tokens, discovery, toolcall, taskpoller, api,
// each started once the one before answers ready, and stopped in reverse,
// each drained (stop accepting, finish in-flight work up to
// shutdown.drain_seconds, close) before the next one stops.
package wiring

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/audit/audittable"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/api"
	"github.com/mcpbus/mcpbus/services/discovery"
	"github.com/mcpbus/mcpbus/services/taskpoller"
	"github.com/mcpbus/mcpbus/services/tokens"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// Service is how to build one service.
type Service struct {
	// Name is the service's name (`mcpbus serve <name>`); its micro
	// service and health subject are "mcpbus-<name>" (bus.Service*).
	Name string
	// NeedsStore reports whether the service uses the database under
	// these settings; Serve opens (and migrates) it only then.
	NeedsStore func(s *config.Settings) bool
	// Build makes the service from a connected runtime; db is nil when
	// NeedsStore is false.
	Build func(ctx context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error)
}

func always(*config.Settings) bool { return true }

// toolcallTasks reports whether toolcall submits durable tasks.
func toolcallTasks(s *config.Settings) bool {
	return s.MCPTasks.Enabled && s.Database.Backend != config.BackendMemory
}

// Order is the dependency order: discovery asks tokens for OAuth headers,
// toolcall asks discovery for the catalog and tokens for headers,
// taskpoller calls toolcall (mcpbus.internal.call), and api fronts them
// all. Dev mode starts them in this order and stops them in reverse.
var Order = []Service{
	{Name: "tokens", NeedsStore: always, Build: buildTokens},
	{Name: "discovery", NeedsStore: always, Build: buildDiscovery},
	{Name: "toolcall", NeedsStore: func(s *config.Settings) bool {
		return toolcallTasks(s) || bootstrap.NeedsAuditStore(s)
	}, Build: buildToolcall},
	{Name: "taskpoller", NeedsStore: always, Build: buildTaskpoller},
	{Name: "api", NeedsStore: always, Build: buildAPI},
}

// ByName returns the service called name.
func ByName(name string) (Service, bool) {
	for _, s := range Order {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// Serve runs svc until ctx is cancelled: the health listener when
// rt.HealthListen is set, its own NATS connection on rt (give each service
// of one process its own rt.Share(), as separate processes would), the
// database opened and migrated when the service needs one and db is nil;
// then it builds and runs the service and closes what it opened.
func Serve(ctx context.Context, rt *bootstrap.Runtime, svc Service, db store.Store) error {
	return bootstrap.Serve(ctx, rt, svc.Name, func(ctx context.Context, rt *bootstrap.Runtime, h *bootstrap.Health) error {
		if !svc.NeedsStore(rt.Settings) {
			db = nil
		} else if db == nil {
			own, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
			if err != nil {
				return fmt.Errorf("%s: %w", svc.Name, err)
			}
			defer own.Close()
			db = own
		}
		if db != nil {
			h.SetDatabase(db.Ping)
		}
		r, err := svc.Build(ctx, rt, db)
		if err != nil {
			return err
		}
		return h.Run(ctx, r)
	})
}

func buildTokens(ctx context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error) {
	deps := tokens.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, KV: rt.KV, LocalExtensions: rt.Extensions,
		Store: db, InstanceID: rt.ReplicaID, Metrics: metrics.NewTokens(rt.MetricsRegistry())}
	var err error
	if deps.Audit, err = rt.AuditWriter(ctx, audittable.Of(db)); err != nil {
		return nil, err
	}
	if db.Backend() != store.BackendMemory {
		deps.Tokens = db.Tokens()
	}
	deps.Sealer, deps.KeyProblem = tokens.SealerFrom(rt.Env)
	return tokens.New(tokens.ConfigFrom(rt.Settings), deps)
}

func buildDiscovery(ctx context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error) {
	presenceKV, err := rt.PresenceKV(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return discovery.New(discovery.ConfigFrom(rt.Settings, rt.NC.MaxPayload()), discovery.Deps{
		Log: rt.Log, NC: rt.NC, Names: rt.Names, JS: rt.JS, KV: rt.KV, PresenceKV: presenceKV, ReplicaID: rt.ReplicaID,
		LocalExtensions: rt.Extensions, Pins: db.Pins(), Metrics: metrics.NewDiscovery(rt.MetricsRegistry())})
}

func buildToolcall(ctx context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error) {
	presenceKV, err := rt.PresenceKV(ctx)
	if err != nil {
		return nil, fmt.Errorf("toolcall: %w", err)
	}
	deps := toolcall.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, KV: rt.KV, PresenceKV: presenceKV,
		LocalExtensions: rt.Extensions, ReplicaID: rt.ReplicaID, Metrics: metrics.NewToolcall(rt.MetricsRegistry())}
	if deps.Audit, err = rt.AuditWriter(ctx, audittable.Of(db)); err != nil {
		return nil, fmt.Errorf("toolcall: %w", err)
	}
	if db != nil && toolcallTasks(rt.Settings) {
		deps.Tasks = db.Tasks()
	}
	return toolcall.New(toolcall.ConfigFrom(rt.Settings, rt.NC.MaxPayload()), deps)
}

func buildTaskpoller(_ context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error) {
	if err := taskpoller.StartupCheck(rt.Extensions, rt.Settings); err != nil {
		return nil, err
	}
	cfg := taskpoller.ConfigFrom(rt.Settings, rt.Extensions)
	cfg.LeaseOwner = rt.ReplicaID
	deps := taskpoller.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, Store: db, Metrics: metrics.NewTaskpoller(rt.MetricsRegistry())}
	if cfg.Enabled {
		deps.Tasks, deps.Events = db.Tasks(), rt.JS
	}
	return taskpoller.New(cfg, deps)
}

func buildAPI(ctx context.Context, rt *bootstrap.Runtime, db store.Store) (bootstrap.Runner, error) {
	sealer, err := crypto.FromEnv(rt.Env)
	if err != nil && !errors.Is(err, crypto.ErrNoKey) {
		return nil, fmt.Errorf("api: %w", err)
	}
	aw, err := rt.AuditWriter(ctx, audittable.Of(db))
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return api.New(api.ConfigFrom(rt.Settings, rt.ExtensionsPath),
		api.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, KV: rt.KV, Store: db, Sealer: sealer, Metrics: rt.MetricsRegistry(), Audit: aw})
}
