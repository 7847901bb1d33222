package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// Migrate applies the pending goose migrations of fsys (the dialect's folder
// of github.com/mcpbus/mcpbus/migrations) to db and returns the names of the
// files it applied, also when a later one failed.
func Migrate(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS, opts ...goose.ProviderOption) ([]string, error) {
	provider, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	results, err := provider.Up(ctx)
	applied := make([]string, 0, len(results))
	for _, r := range results {
		if r.Error == nil {
			applied = append(applied, r.Source.Path)
		}
	}
	if err != nil {
		return applied, fmt.Errorf("migrate: %w", err)
	}
	return applied, nil
}
