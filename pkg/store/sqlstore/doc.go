// Package sqlstore is the one SQL implementation of the store interfaces,
// shared by the postgres and sqlite backends over database/sql.
//
// What differs between the dialects is described once by a Dialect (the
// clock expression, the time column type and encoding, the lease interval
// arithmetic, row locking, and how a unique violation looks); everything else
// is written once:
//
//   - columns.go: one column table per table. Each task column names its
//     Task field and the writes that touch it (insert only, UpdateTaskUnderLease,
//     UpdateNotificationUnderLease), and the INSERT, UPDATE and SELECT lists,
//     the arguments and the scan destinations are all derived from it. Adding
//     a task column is one line here, one field in store.Task, and a
//     migration per dialect.
//   - tasks.go, tokens.go, connections.go: the statements, in a SQL both
//     dialects accept, with tokens ({now}, {lease}, {claim_lock}, {row_lock})
//     that New replaces from the Dialect once, when the store opens.
//
// Both dialects take $n placeholders, ON CONFLICT … DO UPDATE with excluded,
// and RETURNING. The nullable "now" parameter is $1 of every statement that
// reads the clock: COALESCE($1, <database clock>), so tests can move time
// while production passes nil.
//
// # Concurrency
//
// Claims are one UPDATE … WHERE id IN (SELECT … LIMIT n {claim_lock})
// RETURNING statement. On PostgreSQL {claim_lock} is FOR UPDATE SKIP LOCKED;
// on SQLite it is empty and the single writer connection (see package sqlite)
// makes the statement atomic. Writes under a lease read the row {row_lock}
// (FOR UPDATE on PostgreSQL) and write it in one transaction.
package sqlstore
