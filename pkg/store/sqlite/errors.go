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
	return fmt.Errorf("store: sqlite: %s: %w", op, store.MarkUnavailable(err, down(se)))
}

// down reports whether a SQLite error (nil when err is none) says the
// database file cannot serve: busy or locked past the busy timeout, cannot
// be opened, an I/O error, a full disk, a read-only or corrupt file.
func down(se *sqlite.Error) bool {
	if se == nil {
		return false
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}
