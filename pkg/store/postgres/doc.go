// Package postgres implements store.Store on PostgreSQL with pgx/v5 and a
// pgxpool.Pool.
//
// The schema comes from the goose migrations embedded in
// github.com/mcpbus/mcpbus/migrations (folder postgres): call Migrate before
// Open. Migrate takes a session-level advisory lock, keyed by the current
// schema, so replicas starting together apply each migration once.
//
// The tables live in the first schema of search_path; set it in the URL
// (search_path=myschema) to isolate a deployment or a test.
//
// All SQL is constant. Leases and due times use the database clock (now()),
// never the caller's; ClaimDueTasks is one UPDATE … WHERE id IN (SELECT …
// FOR UPDATE SKIP LOCKED) … RETURNING statement.
package postgres
