package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/mcpbus/mcpbus/migrations"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
)

// Migration lock timing: try every second for up to five minutes.
const (
	lockPeriodSeconds = 1
	lockAttempts      = 300
)

// Migrate applies the pending goose migrations to the database at
// databaseURL and returns the names of the files it applied (none when the
// schema is current).
//
// It holds a session-level advisory lock while it runs, so concurrent calls
// from several replicas apply each migration once: the others wait, then
// find nothing to do. The lock id derives from the current schema (the first
// existing schema of search_path), so deployments in different schemas of one
// database do not wait for each other.
func Migrate(ctx context.Context, databaseURL string, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pool, err := newPool(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	var schema string
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("store: postgres: migrate: read current schema: %w", err)
	}
	if schema == "" {
		return nil, fmt.Errorf("store: postgres: migrate %s: no schema of search_path exists", RedactURL(databaseURL))
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID(schema)),
		lock.WithLockTimeout(lockPeriodSeconds, lockAttempts),
	)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: migrate: %w", err)
	}
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		return nil, fmt.Errorf("store: postgres: migrate: %w", err)
	}
	applied, err := sqlstore.Migrate(ctx, goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker), goose.WithSlog(log))
	if err != nil {
		return applied, fmt.Errorf("store: postgres: %w", err)
	}
	log.InfoContext(ctx, "database migrated", slog.String("backend", store.BackendPostgres),
		slog.String("schema", schema), slog.Int("applied", len(applied)))
	return applied, nil
}

// migrationLockID is the advisory lock id of schema's migrations.
func migrationLockID(schema string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, "mcpbus-migrations\x00"+schema)
	return int64(h.Sum64()) //nolint:gosec // a lock id: wrapping to negative is fine
}

// CheckSchema checks the schema of the database at databaseURL against the
// migrations this release embeds (sqlstore.CheckSchema) and returns the
// database's version and the newest this release knows.
func CheckSchema(ctx context.Context, databaseURL string) (current, known int64, err error) {
	pool, err := newPool(ctx, databaseURL)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("store: postgres: %w", err)
	}
	current, known, err = sqlstore.CheckSchema(ctx, goose.DialectPostgres, db, fsys)
	if err != nil {
		return current, known, fmt.Errorf("store: postgres: %w", err)
	}
	return current, known, nil
}
