package postgres

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
)

// pgUniqueViolation is SQLSTATE unique_violation.
const pgUniqueViolation = "23505"

// Dialect is PostgreSQL's: timestamptz columns (microseconds), the
// transaction clock now(), and row locks (SKIP LOCKED for claims, FOR UPDATE
// before a write under a lease), so replicas share the tables safely.
var Dialect = sqlstore.Dialect{
	Backend:      store.BackendPostgres,
	Clock:        "now()",
	TimeType:     "timestamptz",
	Interval:     "CAST(%s AS bigint) * interval '1 microsecond'",
	DurationUnit: time.Microsecond,
	ClaimLock:    "FOR UPDATE SKIP LOCKED",
	RowLock:      "FOR UPDATE",
	EncodeTime:   func(t time.Time) any { return t },
	IsUniqueViolation: func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation
	},
}
