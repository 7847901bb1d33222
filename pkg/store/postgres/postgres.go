package postgres

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
)

// Store is a store.Store over a pgxpool.Pool, through database/sql and the
// shared SQL implementation. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at databaseURL (a postgres:// URL or a
// keyword/value DSN; pgxpool settings such as pool_max_conns are accepted)
// and pings it, so a wrong URL fails here. Errors name the backend and never
// show the password. Open does not migrate: call Migrate first.
func Open(ctx context.Context, databaseURL string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pool, err := newPool(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	shared, err := sqlstore.New(stdlib.OpenDBFromPool(pool), Dialect, pool.Close)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &Store{Store: shared, pool: pool}
	log.InfoContext(ctx, "database opened", slog.String("backend", store.BackendPostgres),
		slog.String("database_url", RedactURL(databaseURL)))
	return s, nil
}

// newPool parses the URL, connects and pings.
func newPool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	password := passwordOf(databaseURL)
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: invalid database url %s: %w",
			RedactURL(databaseURL), redactError(err, password))
	}
	if cfg.ConnConfig.Password != "" {
		password = cfg.ConnConfig.Password
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "mcpbus"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: connect to %s: %w", RedactURL(databaseURL), redactError(err, password))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: ping %s: %w", RedactURL(databaseURL), redactError(err, password))
	}
	return pool, nil
}

// Pool returns the underlying pool, for callers that need PostgreSQL-only
// features (LISTEN/NOTIFY). Store methods remain the way to touch the tables.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]+)`)

// RedactURL returns databaseURL with its password replaced by "xxxxx", for
// logs and errors. It handles postgres:// URLs (user info and a password
// query parameter) and keyword/value DSNs.
func RedactURL(databaseURL string) string {
	if strings.HasPrefix(databaseURL, "postgres://") || strings.HasPrefix(databaseURL, "postgresql://") {
		u, err := url.Parse(databaseURL)
		if err != nil {
			return "postgres://(unparsable url)"
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return kvPassword.ReplaceAllString(databaseURL, "${1}xxxxx")
}

// passwordOf extracts the password from a URL or DSN, best effort, so that
// driver errors quoting it can be scrubbed.
func passwordOf(databaseURL string) string {
	if strings.HasPrefix(databaseURL, "postgres://") || strings.HasPrefix(databaseURL, "postgresql://") {
		u, err := url.Parse(databaseURL)
		if err != nil {
			return ""
		}
		if p, ok := u.User.Password(); ok { // Password is nil-safe
			return p
		}
		return u.Query().Get("password")
	}
	if m := kvPassword.FindStringSubmatch(databaseURL); m != nil {
		return strings.Trim(m[2], "'")
	}
	return ""
}

// redactedError hides a password that a driver error quotes.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redactError(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), password, "xxxxx"), err: err}
}
