// Package sqlite implements store.Store on an SQLite file with the pure-Go
// driver modernc.org/sqlite (driver name "sqlite"), for `mcpbus dev` and
// single-node deployments.
//
// The schema comes from the goose migrations embedded in
// github.com/mcpbus/mcpbus/migrations (folder sqlite): call Migrate before
// Open.
//
// # Storage conventions
//
// Every timestamp is an INTEGER of Unix milliseconds (UTC); JSON is TEXT;
// binary is BLOB; booleans are 0/1. "Now" is SQLite's own clock
// (unixepoch('subsec')), the same clock as the process.
//
// # Concurrency
//
// The SQL is package sqlstore's, in this package's Dialect. The database
// is opened in WAL mode with busy_timeout, foreign keys and
// _txlock=immediate, and with one open connection: every statement and
// transaction runs on the single writer, so a claim (one UPDATE … WHERE
// id IN (SELECT … LIMIT n) RETURNING … statement) cannot hand a row to two
// claimers. Several processes on one file are safe but serialise on the
// file lock; use PostgreSQL for replicas.
package sqlite
