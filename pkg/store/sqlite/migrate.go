package sqlite

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"

	"github.com/pressly/goose/v3"

	"github.com/mcpbus/mcpbus/migrations"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
)

// Migrate applies the pending goose migrations to the SQLite database at path
// (created with its directory when missing; "" means DefaultPath) and returns
// the names of the files it applied. SQLite has no migration lock: run it
// from one process, before Open.
func Migrate(ctx context.Context, path string, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	db, abs, err := openDB(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		return nil, fmt.Errorf("store: sqlite: migrate: %w", err)
	}
	applied, err := sqlstore.Migrate(ctx, goose.DialectSQLite3, db, fsys, goose.WithSlog(log))
	if err != nil {
		return applied, fmt.Errorf("store: sqlite: %s: %w", abs, err)
	}
	log.InfoContext(ctx, "database migrated", slog.String("backend", store.BackendSQLite),
		slog.String("path", abs), slog.Int("applied", len(applied)))
	return applied, nil
}

// CheckSchema checks the schema of the SQLite database at path against the
// migrations this release embeds (sqlstore.CheckSchema) and returns the
// database's version and the newest this release knows.
func CheckSchema(ctx context.Context, path string) (current, known int64, err error) {
	db, abs, err := openDB(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		return 0, 0, fmt.Errorf("store: sqlite: %w", err)
	}
	current, known, err = sqlstore.CheckSchema(ctx, goose.DialectSQLite3, db, fsys)
	if err != nil {
		return current, known, fmt.Errorf("store: sqlite: %s: %w", abs, err)
	}
	return current, known, nil
}
