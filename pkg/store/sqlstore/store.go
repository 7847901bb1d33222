package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// Store implements store.TaskStore, store.TokenStore and
// store.ConnectionStore over one *sql.DB in one Dialect. It is safe for
// concurrent use; the backend packages wrap it into a store.Store.
type Store struct {
	db        *sql.DB
	d         Dialect
	q         statements
	onClose   func()
	closeOnce sync.Once
	closed    atomic.Bool
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// New returns the store over db, which must already hold the migrated
// schema. The statements are rendered for d once, here. Close closes db,
// then calls onClose when it is not nil.
func New(db *sql.DB, d Dialect, onClose func()) (*Store, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	return &Store{db: db, d: d, q: renderStatements(d), onClose: onClose}, nil
}

// Close closes the database; it is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = s.db.Close()
		if s.onClose != nil {
			s.onClose()
		}
	})
	return s.closeErr
}

// Tasks returns the task store (s itself).
func (s *Store) Tasks() store.TaskStore { return s }

// Tokens returns the OAuth token store (s itself).
func (s *Store) Tokens() store.TokenStore { return s }

// Connections returns the personal connection store (s itself).
func (s *Store) Connections() store.ConnectionStore { return s }

// Audit returns the audit log table (s itself).
func (s *Store) Audit() store.AuditStore { return s }

// Pins returns the tool pinning tables (s itself).
func (s *Store) Pins() store.PinStore { return s }

// Backend returns the dialect's backend name.
func (s *Store) Backend() string { return s.d.Backend }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: %s: ping: %w", s.d.Backend, err)
	}
	return nil
}

// statements are every statement of the store, rendered for one dialect.
type statements struct {
	tasks       taskStatements
	tokens      tokenStatements
	connections connectionStatements
	audit       auditStatements
	pins        pinStatements
}

func renderStatements(d Dialect) statements {
	return statements{tasks: taskSQL(d), tokens: tokenSQL(d), connections: connectionSQL(d), audit: auditSQL(d), pins: pinSQL(d)}
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// queryRows runs query and scans every row into a T through cols. It always
// reads every row, so a statement with RETURNING completes. The result is
// never nil.
func queryRows[T any](ctx context.Context, q querier, cols []column[T], query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var row T
		if err := rows.Scan(scanDests(cols, &row)...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// queryRow is queryRows for at most one row; none is sql.ErrNoRows.
func queryRow[T any](ctx context.Context, q querier, cols []column[T], query string, args ...any) (*T, error) {
	rows, err := queryRows(ctx, q, cols, query, args...)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, sql.ErrNoRows
	}
	return &rows[0], nil
}

// exec runs a statement and returns the number of rows it changed.
func exec(ctx context.Context, q querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// inTx runs fn in a transaction and commits when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// translate maps driver errors to the store errors and prefixes op. Store
// errors (ErrInvalid, ErrLeaseLost…) pass through with the prefix.
func (s *Store) translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: %s: %s: %w", s.d.Backend, op, store.ErrNotFound)
	case s.d.IsUniqueViolation(err):
		return fmt.Errorf("store: %s: %s: %w (%s)", s.d.Backend, op, store.ErrConflict, err.Error())
	}
	// A closed store cannot serve either (database/sql's "database is
	// closed" has no exported sentinel).
	down := s.closed.Load() || (s.d.IsDown != nil && s.d.IsDown(err))
	return fmt.Errorf("store: %s: %s: %w", s.d.Backend, op, store.MarkUnavailable(err, down))
}

// rowsAffected turns a count of changed rows into want when it is zero.
func rowsAffected(n int64, err error, want error) error {
	if err != nil {
		return err
	}
	if n == 0 {
		return want
	}
	return nil
}
