package testkit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
)

// SQLiteStore opens a migrated SQLite database in a temporary directory,
// closed when the test ends.
func SQLiteStore(t testing.TB) store.Store {
	t.Helper()
	db := config.DatabaseSettings{Backend: config.BackendSQLite, Path: filepath.Join(t.TempDir(), "mcpbus.db")}
	ctx := context.Background()
	if _, err := backends.Migrate(ctx, db, observability.Discard()); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	st, err := backends.Open(ctx, db, observability.Discard())
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// SQLStores runs fn in a parallel subtest per SQL backend (sqlite, then
// postgres), each with a fresh migrated store.
func SQLStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Helper()
	for name, open := range map[string]func(testing.TB) store.Store{
		store.BackendSQLite:   SQLiteStore,
		store.BackendPostgres: func(t testing.TB) store.Store { return PostgresStore(t, map[string]string{"pool_max_conns": "4"}) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open(t))
		})
	}
}
