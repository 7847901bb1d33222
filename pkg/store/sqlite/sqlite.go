package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
)

// DefaultPath is the database file when none is configured.
const DefaultPath = ".mcpbus/mcpbus.db"

// dsnParams: busy_timeout first (the driver applies it first anyway), WAL,
// foreign keys, and BEGIN IMMEDIATE for every transaction so that a
// transaction that writes never fails to upgrade its lock.
const dsnParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)" +
	"&_pragma=foreign_keys(1)&_txlock=immediate"

// Store is a store.Store over one SQLite file, driven by the shared SQL of
// package sqlstore. It is safe for concurrent use.
type Store struct {
	*sqlstore.Store
	path string
}

var _ store.Store = (*Store)(nil)

// Open opens (creating when missing) the SQLite database at path, creating
// its parent directory, and pings it. An empty path means DefaultPath. Open
// does not migrate: call Migrate first.
func Open(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	db, abs, err := openDB(ctx, path)
	if err != nil {
		return nil, err
	}
	shared, err := sqlstore.New(db, Dialect, nil)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{Store: shared, path: abs}
	log.InfoContext(ctx, "database opened", slog.String("backend", store.BackendSQLite), slog.String("path", abs))
	return s, nil
}

// openDB opens path with the store's DSN and a single connection.
func openDB(ctx context.Context, path string) (*sql.DB, string, error) {
	abs, err := filepath.Abs(cmp.Or(path, DefaultPath))
	if err != nil {
		return nil, "", fmt.Errorf("store: sqlite: path %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, "", fmt.Errorf("store: sqlite: create directory of %s: %w", abs, err)
	}
	if err := private(abs); err != nil {
		return nil, "", err
	}
	db, err := sql.Open("sqlite", DSN(abs))
	if err != nil {
		return nil, "", fmt.Errorf("store: sqlite: open %s: %w", abs, err)
	}
	// One writer connection: statements and transactions serialise in
	// database/sql instead of meeting SQLITE_BUSY.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, "", fmt.Errorf("store: sqlite: open %s: %w", abs, err)
	}
	return db, abs, nil
}

// private creates the database file readable by its owner only (0600), or
// makes an existing one (and its -wal and -shm files) so: SQLite gives the
// files it adds the database file's mode. Stdio children running under
// another uid must not read the database even where they can reach its
// directory.
func private(abs string) error {
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: sqlite: create %s: %w", abs, err)
	}
	_ = f.Close()
	for _, p := range []string{abs, abs + "-wal", abs + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: sqlite: make %s private: %w", p, err)
		}
	}
	return nil
}

// DSN returns the modernc.org/sqlite data source name the store uses for an
// absolute path.
func DSN(absPath string) string {
	u := url.URL{Scheme: "file", Path: absPath, RawQuery: dsnParams}
	return u.String()
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }
