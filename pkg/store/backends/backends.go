// Package backends opens the store.Store that config.DatabaseSettings names
// and runs its migrations. It is the one place that imports every backend
// (postgres, sqlite, memory), which package store itself cannot do without an
// import cycle.
//
// Call order at startup: Migrate, then Open. Open never migrates.
package backends

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/memory"
	"github.com/mcpbus/mcpbus/pkg/store/postgres"
	"github.com/mcpbus/mcpbus/pkg/store/sqlite"
)

// backendName returns the configured backend, "memory" when empty.
func backendName(cfg config.DatabaseSettings) string {
	return cmp.Or(cfg.Backend, store.BackendMemory)
}

// Open opens the configured backend: "postgres" (cfg.URL; pinged, so a bad
// URL fails here with the password redacted), "sqlite" (cfg.Path, created
// with its directory when missing; "" means .mcpbus/mcpbus.db) or "memory"
// (also when Backend is empty). log may be nil.
func Open(ctx context.Context, cfg config.DatabaseSettings, log *slog.Logger) (store.Store, error) {
	switch b := backendName(cfg); b {
	case store.BackendPostgres:
		if cfg.URL == "" {
			return nil, fmt.Errorf("store: postgres: database.url must not be empty")
		}
		return postgres.Open(ctx, cfg.URL, log)
	case store.BackendSQLite:
		return sqlite.Open(ctx, cfg.Path, log)
	case store.BackendMemory:
		return memory.New(), nil
	default:
		return nil, fmt.Errorf("store: unknown database.backend %q (want memory, sqlite or postgres)", b)
	}
}

// Migrate applies the pending migrations of the configured backend and
// returns the names of the files applied. On PostgreSQL concurrent callers
// (replicas starting together) apply each migration once; on memory it does
// nothing.
func Migrate(ctx context.Context, cfg config.DatabaseSettings, log *slog.Logger) ([]string, error) {
	switch b := backendName(cfg); b {
	case store.BackendPostgres:
		if cfg.URL == "" {
			return nil, fmt.Errorf("store: postgres: database.url must not be empty")
		}
		return postgres.Migrate(ctx, cfg.URL, log)
	case store.BackendSQLite:
		return sqlite.Migrate(ctx, cfg.Path, log)
	case store.BackendMemory:
		return nil, nil
	default:
		return nil, fmt.Errorf("store: unknown database.backend %q (want memory, sqlite or postgres)", b)
	}
}
