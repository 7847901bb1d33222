package postgres

import (
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

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
	IsDown: down,
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
