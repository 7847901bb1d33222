package backends_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/migrations"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"", config.BackendMemory} {
		cfg := config.DatabaseSettings{Backend: backend}
		applied, err := backends.Migrate(t.Context(), cfg, nil)
		if err != nil || applied != nil {
			t.Fatalf("Migrate(%q) = %v, %v; want nothing", backend, applied, err)
		}
		s, err := backends.Open(t.Context(), cfg, nil)
		if err != nil {
			t.Fatalf("Open(%q): %v", backend, err)
		}
		if s.Backend() != store.BackendMemory {
			t.Fatalf("Open(%q).Backend() = %q", backend, s.Backend())
		}
		if _, err := s.Tasks().GetTask(t.Context(), store.GetTaskParams{ID: "x"}); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("memory tasks: %v, want ErrUnavailable", err)
		}
		_ = s.Close()
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	cfg := config.DatabaseSettings{Backend: config.BackendSQLite, Path: filepath.Join(t.TempDir(), "a", "b.db")}
	applied, err := backends.Migrate(t.Context(), cfg, nil)
	var want []string
	entries, _ := fs.ReadDir(migrations.SQLite, "sqlite")
	for _, e := range entries {
		want = append(want, e.Name())
	}
	if err != nil || len(want) < 4 || !slices.Equal(applied, want) {
		t.Fatalf("Migrate = %v, %v; want every embedded migration %v", applied, err, want)
	}
	if err := backends.CheckSchema(t.Context(), cfg, nil); err != nil {
		t.Fatalf("CheckSchema on the migrated database: %v", err)
	}
	s, err := backends.Open(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if s.Backend() != store.BackendSQLite {
		t.Fatalf("Backend() = %q", s.Backend())
	}
	if _, err := s.Connections().ListConnections(t.Context(), store.ListConnectionsParams{UserID: "u"}); err != nil {
		t.Fatalf("ListConnections on the migrated database: %v", err)
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	url := testkit.TestDatabaseURL()
	s, err := backends.Open(t.Context(), config.DatabaseSettings{Backend: config.BackendPostgres, URL: url}, nil)
	if err != nil {
		t.Fatalf("PostgreSQL is required by this test (set TEST_DATABASE_URL): %v", err)
	}
	defer s.Close()
	if s.Backend() != store.BackendPostgres {
		t.Fatalf("Backend() = %q", s.Backend())
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for name, cfg := range map[string]config.DatabaseSettings{
		"unknown backend":   {Backend: "mysql"},
		"postgres, no url":  {Backend: config.BackendPostgres},
		"postgres, refused": {Backend: config.BackendPostgres, URL: "postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable"},
	} {
		if _, err := backends.Open(ctx, cfg, nil); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open %s: error %v, want a failure without the password", name, err)
		}
		if _, err := backends.Migrate(ctx, cfg, nil); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Migrate %s: error %v, want a failure without the password", name, err)
		}
	}
}
