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
}
