package store

import (
	"database/sql"
	"errors"
	"io"
	"net"
	"syscall"
)

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
	// ErrUnavailable: the store cannot serve the call now: the database
	// cannot be reached (down, restarting, dropped, its pool closed; see
	// MarkUnavailable), or the backend has no such store (the memory backend
	// has no durable task store). Callers answer "unavailable": a retry may
	// succeed, and the cause is not the caller's request.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrInvalid: an argument failed validation before reaching the database.
	ErrInvalid = errors.New("store: invalid argument")
)

// MarkUnavailable returns err wrapped so that it also matches ErrUnavailable
// when down is true (the backend's reading of its driver's codes) or when
// err says, in a driver-independent way, that the database could not be
// reached or went away under the call: a network error, a refused, reset or
// broken connection, an EOF on the wire, sql.ErrConnDone. Otherwise, and for
// nil, it returns err unchanged. Both backends pass every driver error that
// is none of ErrNotFound, ErrConflict through it, so callers classify with
// errors.Is, never with the driver's text.
func MarkUnavailable(err error, down bool) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !(down || unreachable(err)) {
		return err
	}
	return &unavailableError{err: err}
}

// unreachable is the driver-independent part of MarkUnavailable.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// unavailableError is a driver error that matches ErrUnavailable; its text
// is the driver's, for the logs.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
