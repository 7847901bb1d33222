package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// translate maps driver errors to the store errors and prefixes op.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: sqlite: %s: %w", op, store.ErrNotFound)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("store: sqlite: %s: %w (%s)", op, store.ErrConflict, se.Error())
		}
	}
	return fmt.Errorf("store: sqlite: %s: %w", op, err)
}
