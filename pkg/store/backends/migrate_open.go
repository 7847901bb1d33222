package backends

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/postgres"
	"github.com/mcpbus/mcpbus/pkg/store/sqlite"
)

// MigrateAndOpen is what a service process does at start: Migrate (when
// database.auto_migrate is on), CheckSchema, then Open. The caller closes
// the store.
func MigrateAndOpen(ctx context.Context, cfg config.DatabaseSettings, log *slog.Logger) (store.Store, error) {
	if cfg.AutoMigrate {
		if _, err := Migrate(ctx, cfg, log); err != nil {
			return nil, err
		}
	}
	if err := CheckSchema(ctx, cfg, log); err != nil {
		return nil, err
	}
	return Open(ctx, cfg, log)
}

// CheckSchema refuses a database whose schema this release cannot run on
// (sqlstore.CheckSchema: older than its newest migration, or newer with a
// migration not declared compatible) and logs a tolerated newer one. The
// memory backend has no schema.
func CheckSchema(ctx context.Context, cfg config.DatabaseSettings, log *slog.Logger) error {
	var current, known int64
	var err error
	switch b := backendName(cfg); b {
	case store.BackendPostgres:
		if cfg.URL == "" {
			return fmt.Errorf("store: postgres: database.url must not be empty")
		}
		current, known, err = postgres.CheckSchema(ctx, cfg.URL)
	case store.BackendSQLite:
		current, known, err = sqlite.CheckSchema(ctx, cfg.Path)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if current > known && log != nil {
		log.WarnContext(ctx, "the database schema is newer than this release knows; its newer migrations declare this release compatible (expand)",
			slog.Int64("schema_version", current), slog.Int64("release_schema_version", known))
	}
	return nil
}
