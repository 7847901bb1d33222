package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	return fmt.Errorf("store: postgres: %s: %w", op, err)
}
