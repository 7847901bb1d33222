package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// pgUniqueViolation is SQLSTATE unique_violation.
const pgUniqueViolation = "23505"

// translate maps driver errors to the store errors and prefixes op.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: postgres: %s: %w", op, store.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation {
		return fmt.Errorf("store: postgres: %s: %w (constraint %s)", op, store.ErrConflict, pgErr.ConstraintName)
	}
	return fmt.Errorf("store: postgres: %s: %w", op, store.MarkUnavailable(err, down(err)))
}

// down reports whether err says the database cannot serve: no connection
// (refused, closed pool, connection closed under the call), or a server
// answer of class 08 (connection exception), 53 (insufficient resources),
// 57P (shutting down, starting up, database dropped) or 3D000 (no such
// database).
func down(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		class := pgErr.Code[:min(2, len(pgErr.Code))]
		return class == "08" || class == "53" || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "3D000"
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.Is(err, puddle.ErrClosedPool) || errors.Is(err, pgconn.ErrConnClosed)
}
