package sqlite

import (
	"errors"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
)

// Dialect is SQLite's: times are INTEGER Unix milliseconds, the clock is
// unixepoch('subsec') (stable within one statement), and there are no row
// locks: the store's single writer connection serialises every statement
// and transaction (BEGIN IMMEDIATE).
var Dialect = sqlstore.Dialect{
	Backend:      store.BackendSQLite,
	Clock:        "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
	TimeType:     "INTEGER",
	Interval:     "%s",
	DurationUnit: time.Millisecond,
	EncodeTime:   func(t time.Time) any { return t.UnixMilli() },
	IsUniqueViolation: func(err error) bool {
		var se *sqlite.Error
		if !errors.As(err, &se) {
			return false
		}
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return true
		}
		return false
	},
	IsDown: down,
}

// down reports whether err says the database file cannot serve: busy or
// locked past the busy timeout, cannot be opened, an I/O error, a full
// disk, a read-only or corrupt file.
func down(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}
