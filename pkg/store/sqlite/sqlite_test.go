package sqlite_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpbus/mcpbus/migrations"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/sqlite"
	"github.com/mcpbus/mcpbus/pkg/store/storetest"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// newStore migrates and opens a fresh database file in a directory that does
// not exist yet (Open and Migrate create it).
func newStore(t *testing.T) store.Store {
	path := filepath.Join(t.TempDir(), "data", "mcpbus.db")
	if _, err := sqlite.Migrate(t.Context(), path, testLogger(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s, err := sqlite.Open(t.Context(), path, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, newStore)
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "m.db")
	applied, err := sqlite.Migrate(ctx, path, testLogger(t))
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	if want := storetest.MigrationNames(t, migrations.SQLite, "sqlite"); !slices.Equal(applied, want) {
		t.Fatalf("first Migrate applied %v, want %v", applied, want)
	}
	applied, err = sqlite.Migrate(ctx, path, testLogger(t))
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if len(applied) != 0 {
		t.Fatalf("second Migrate applied %v, want nothing", applied)
	}
}

func TestOpenAwkwardPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "dir with space?and#hash%", "x.db")
	if _, err := sqlite.Migrate(ctx, path, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Fatalf("Path() = %q, want %q", s.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the database is not at the configured path: %v", err)
	}
	if _, err := s.Tasks().GetTask(ctx, store.GetTaskParams{ID: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTask on the migrated file: %v, want ErrNotFound", err)
	}
}

func TestOpenWithoutMigrate(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "empty.db"), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	_, err = s.Tasks().GetTask(t.Context(), store.GetTaskParams{ID: "x"})
	if err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTask on an unmigrated database: %v, want a missing-table error", err)
	}
}
