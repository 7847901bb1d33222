package backends

import (
	"context"
	"log/slog"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// MigrateAndOpen is what a service process does at start: Migrate, then
// Open. The caller closes the store.
func MigrateAndOpen(ctx context.Context, cfg config.DatabaseSettings, log *slog.Logger) (store.Store, error) {
	if _, err := Migrate(ctx, cfg, log); err != nil {
		return nil, err
	}
	return Open(ctx, cfg, log)
}
