package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/store/sqlite"
)

// TestDatabaseFilesArePrivate: the database and its WAL files are 0600,
// new or already there with a looser mode, so a stdio child under another
// uid cannot read them (issue 11: no access to the data directory).
func TestDatabaseFilesArePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.db")
	loose := filepath.Join(dir, "loose.db")
	if err := os.WriteFile(loose, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fresh, loose} {
		if _, err := sqlite.Migrate(t.Context(), path, nil); err != nil {
			t.Fatal(err)
		}
		s, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				if p == path {
					t.Fatal(err)
				}
				continue // no WAL file (yet)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %o, want 0600", filepath.Base(p), fi.Mode().Perm())
			}
		}
		_ = s.Close()
	}
}
