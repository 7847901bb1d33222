package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// Dialect is what one SQL backend does differently. The postgres and sqlite
// packages each define one.
type Dialect struct {
	// Backend is store.BackendPostgres or store.BackendSQLite; it also
	// prefixes errors ("store: postgres: …").
	Backend string
	// Clock is the SQL expression of the database clock in the time column
	// type, e.g. now().
	Clock string
	// TimeType is the SQL type of time columns, used to cast time
	// parameters, e.g. timestamptz.
	TimeType string
	// Interval formats a duration parameter (a count of DurationUnit) as
	// something that can be added to a time column, e.g. "CAST(%s AS bigint)
	// * interval '1 microsecond'".
	Interval string
	// DurationUnit is the unit of duration parameters.
	DurationUnit time.Duration
	// ClaimLock ends a claim's sub-select, e.g. FOR UPDATE SKIP LOCKED; ""
	// where one writer serialises statements.
	ClaimLock string
	// RowLock ends the SELECT that reads a row before a write under a
	// lease, e.g. FOR UPDATE; "" where transactions already hold the write
	// lock.
	RowLock string
	// EncodeTime maps a time to the value stored in a time column.
	EncodeTime func(time.Time) any
	// IsUniqueViolation reports whether a driver error is a unique or
	// primary key violation.
	IsUniqueViolation func(error) bool
	// IsDown reports whether a driver error says the database cannot serve
	// now (beyond the driver-independent cases store.MarkUnavailable
	// knows): such errors match store.ErrUnavailable. Optional.
	IsDown func(error) bool
}

// validate reports a Dialect with a missing field.
func (d Dialect) validate() error {
	if d.Backend == "" || d.Clock == "" || d.TimeType == "" || d.Interval == "" || d.DurationUnit <= 0 ||
		d.EncodeTime == nil || d.IsUniqueViolation == nil {
		return fmt.Errorf("store: sqlstore: incomplete dialect %q", d.Backend)
	}
	return nil
}

// timeParam casts parameter n to the time column type.
func (d Dialect) timeParam(n int) string {
	return fmt.Sprintf("CAST($%d AS %s)", n, d.TimeType)
}

// render replaces the dialect tokens of a statement. $1 is the nullable now
// and $2 the lease duration of the statements that use {now} and {lease}.
func (d Dialect) render(query string) string {
	return strings.NewReplacer(
		"{now}", "COALESCE("+d.timeParam(1)+", "+d.Clock+")",
		"{lease}", fmt.Sprintf(d.Interval, "$2"),
		"{claim_lock}", d.ClaimLock,
		"{row_lock}", d.RowLock,
	).Replace(query)
}

// now encodes the nullable now parameter.
func (d Dialect) now(t *time.Time) any {
	if t == nil {
		return nil
	}
	return d.EncodeTime(*t)
}

// duration encodes a duration parameter.
func (d Dialect) duration(v time.Duration) int64 { return int64(v / d.DurationUnit) }

// sqlList renders constant strings as a SQL list: ('a', 'b'). The values are
// the store's own constants, never input.
func sqlList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

var (
	nonTerminalSQL     = sqlList(store.NonTerminalTaskStatuses())
	dueNotificationSQL = sqlList(store.DueNotificationStatuses())
)
