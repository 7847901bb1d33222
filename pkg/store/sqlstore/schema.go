package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// ErrSchemaMismatch is the error of CheckSchema: the database's schema is
// one this release cannot run on (errors.Is).
var ErrSchemaMismatch = errors.New("database schema version mismatch")

// CheckSchema compares the schema version of db (goose's, the newest
// migration applied) with the newest migration of fsys (the one this
// release knows) and refuses what this release cannot run on:
//   - an older schema: the release's migrations have not run (run `mcpbus
//     migrate`, or set database.auto_migrate);
//   - a newer schema, unless every newer migration declared in the table
//     mcpbus_schema_compat that releases knowing this one's version may
//     run on it (an expand migration; docs/operations.md).
//
// It returns both versions and whether the schema is newer (and tolerated).
func CheckSchema(ctx context.Context, dialect goose.Dialect, db *sql.DB, fsys fs.FS) (current, known int64, err error) {
	provider, err := goose.NewProvider(dialect, db, fsys)
	if err != nil {
		return 0, 0, fmt.Errorf("schema check: %w", err)
	}
	for _, s := range provider.ListSources() {
		known = max(known, s.Version)
	}
	current, err = provider.GetDBVersion(ctx)
	if err != nil {
		return 0, known, fmt.Errorf("schema check: read the database's schema version: %w", err)
	}
	switch {
	case current < known:
		return current, known, fmt.Errorf("%w: the database schema is at version %d, older than the version this mcpbus release needs (%d): run `mcpbus migrate` first (or set database.auto_migrate: true)",
			ErrSchemaMismatch, current, known)
	case current == known:
		return current, known, nil
	}
	compat, err := compatibility(ctx, db)
	if err != nil {
		return current, known, err
	}
	// Every applied migration newer than known must accept known.
	rows, err := db.QueryContext(ctx, `SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY version_id`)
	if err != nil {
		return current, known, fmt.Errorf("schema check: read the applied migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return current, known, fmt.Errorf("schema check: read the applied migrations: %w", err)
		}
		if v <= known {
			continue
		}
		if from, ok := compat[v]; !ok || from > known {
			return current, known, fmt.Errorf("%w: the database schema is at version %d, newer than this mcpbus release knows (%d), and migration %d is not compatible with schema %d releases: upgrade mcpbus to a release that knows schema %d",
				ErrSchemaMismatch, current, known, v, known, current)
		}
	}
	if err := rows.Err(); err != nil {
		return current, known, fmt.Errorf("schema check: read the applied migrations: %w", err)
	}
	return current, known, nil
}

// compatibility reads mcpbus_schema_compat: version → compatible_from.
func compatibility(ctx context.Context, db *sql.DB) (map[int64]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT version, compatible_from FROM mcpbus_schema_compat`)
	if err != nil {
		return nil, fmt.Errorf("schema check: read mcpbus_schema_compat: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var v, from int64
		if err := rows.Scan(&v, &from); err != nil {
			return nil, fmt.Errorf("schema check: read mcpbus_schema_compat: %w", err)
		}
		out[v] = from
	}
	return out, rows.Err()
}
