// Package postgres implements store.Store on PostgreSQL with pgx/v5: a
// pgxpool.Pool opened through database/sql (pgx's stdlib) and driven by the
// shared SQL of package sqlstore in this package's Dialect.
//
// The schema comes from the goose migrations embedded in
// github.com/mcpbus/mcpbus/migrations (folder postgres): call Migrate before
// Open. Migrate takes a session-level advisory lock, keyed by the current
// schema, so replicas starting together apply each migration once.
//
// The tables live in the first schema of search_path; set it in the URL
// (search_path=myschema) to isolate a deployment or a test.
//
// Claims are one UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)
// … RETURNING statement, so concurrent replicas never claim the same row.
package postgres
