// Package store is the persistence contract of mcpbus: the domain types of the
// three tables (Task, OAuthToken, PersonalConnection), the errors callers
// match with errors.Is, and one small interface per consumer gathered by
// Store: TaskSubmitStore (toolcall's submit), TaskAPIStore (the task API),
// TaskPollStore (the poller), all three as TaskStore, TokenStore (tokens)
// and ConnectionStore (the api's personal connections). Every method takes
// ctx and a …Params struct. The task statuses are defined here once
// (TaskStatuses); the SQL and the OpenAPI document derive theirs from it.
//
// The package depends on no database driver. The implementations live in
// sub-packages: sqlstore (the one SQL implementation, over database/sql),
// postgres (pgx) and sqlite (modernc.org/sqlite) that each give sqlstore a
// Dialect and a connection, and memory (maps; tokens and connections only,
// its TaskStore returns ErrUnavailable). The
// backends sub-package picks one from config.DatabaseSettings and runs the
// goose migrations; storetest is the conformance suite every backend runs.
//
// # Time
//
// Leases, claims and the "now" written by the stores come from the database
// clock (now() on PostgreSQL) unless the caller passes the Now field of the
// method's parameters, which tests do to move time without sleeping
// (production leaves it nil). Times are returned in
// UTC. PostgreSQL keeps microseconds and SQLite milliseconds, so a time that
// makes a round trip is truncated to the backend's precision.
//
// # Optional columns
//
// Nullable text columns map to string, with "" meaning NULL; nullable times
// to *time.Time; JSON columns to json.RawMessage, with nil meaning NULL.
// PostgreSQL stores JSON as jsonb, which normalises whitespace and key order:
// compare JSON semantically, not byte for byte.
//
// # Concurrency
//
// Every implementation is safe for concurrent use by multiple goroutines and,
// for the SQL backends, by multiple processes sharing one database.
package store
