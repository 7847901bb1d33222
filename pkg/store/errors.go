package store

import "errors"

// Errors returned by every implementation; match them with errors.Is. Driver
// errors never cross the store boundary untranslated when one of these
// applies.
var (
	// ErrNotFound: no row matches (pgx.ErrNoRows, sql.ErrNoRows).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a unique constraint was violated (PostgreSQL 23505,
	// SQLITE_CONSTRAINT_UNIQUE or _PRIMARYKEY), for example a remote task id
	// that the same user already tracks on the same server.
	ErrConflict = errors.New("store: conflict")
	// ErrLeaseLost: a write guarded by a lease found that the caller no longer
	// holds it (another owner claimed the row, the lease expired, or a cancel
	// request released it).
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrUnavailable: the backend cannot provide this store (the memory
	// backend has no durable task store).
	ErrUnavailable = errors.New("store: unavailable on this backend")
	// ErrInvalid: an argument failed validation before reaching the database.
	ErrInvalid = errors.New("store: invalid argument")
)
