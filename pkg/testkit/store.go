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
