// Package migrations embeds the goose SQL migrations of mcpbus, one folder
// per dialect (postgres/, sqlite/) with the same tables and columns.
package migrations

import "embed"

// Postgres holds the PostgreSQL migrations under "postgres".
//
//go:embed postgres/*.sql
var Postgres embed.FS

// SQLite holds the SQLite migrations under "sqlite".
//
//go:embed sqlite/*.sql
var SQLite embed.FS
