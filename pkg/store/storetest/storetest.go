// Package storetest is the conformance suite every store.Store backend runs:
// the postgres and sqlite tests call Exercise, the memory tests call
// ExerciseTokens and ExerciseConnections (memory has no task store).
//
// newStore must return a fresh, migrated, empty store for the test it is
// given and register its own cleanup (closing the store is done by the
// suite's caller, not the suite). Every sub-test calls t.Parallel and opens
// its own store, so backends must isolate stores from each other (a schema
// per store on PostgreSQL, a file per store on SQLite).
//
// The suite never sleeps: lease expiry is simulated with the Now parameter
// of the store methods (a claim made in the past holds a lease that has
// already expired).
//
// The claims production uses (ClaimDuePolls, ClaimDueCancels,
// ClaimDueNotifications, ClaimRefreshLease) each run under concurrent
// claimers: on PostgreSQL over several pool connections, on SQLite through
// its single writer.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// NewStore opens a fresh, migrated, empty store for one test.
type NewStore func(t *testing.T) store.Store

// Exercise runs the whole suite: the Store methods, tasks, tokens and
// connections.
func Exercise(t *testing.T, newStore NewStore) {
	t.Helper()
	t.Run("Store", func(t *testing.T) {
		t.Parallel()
		ExerciseStore(t, newStore)
	})
	t.Run("Tasks", func(t *testing.T) { ExerciseTasks(t, newStore) })
	t.Run("Tokens", func(t *testing.T) { ExerciseTokens(t, newStore) })
	t.Run("Connections", func(t *testing.T) { ExerciseConnections(t, newStore) })
	t.Run("Audit", func(t *testing.T) { ExerciseAudit(t, newStore) })
}

// ExerciseStore checks Backend, Ping and Close.
func ExerciseStore(t *testing.T, newStore NewStore) {
	s := newStore(t)
	switch b := s.Backend(); b {
	case store.BackendMemory, store.BackendSQLite, store.BackendPostgres:
	default:
		t.Errorf("Backend() = %q, want memory, sqlite or postgres", b)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if s.Tasks() == nil || s.Tokens() == nil || s.Connections() == nil || s.Audit() == nil {
		t.Fatal("a sub-store is nil")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// wantErr fails the test unless errors.Is(err, want).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error = %v, want %v", what, err, want)
	}
}

// must fails the test on a non-nil error.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// canonicalJSON re-encodes a JSON document so that whitespace and key order
// do not matter (PostgreSQL jsonb rewrites both).
func canonicalJSON(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if raw == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("stored JSON %q does not parse: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameJSON reports whether two documents are equal as JSON values.
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	return reflect.DeepEqual(canonicalJSON(t, a), canonicalJSON(t, b))
}

// render encodes v as JSON for comparisons and failure messages.
func render(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// ms returns a time truncated to milliseconds (the coarsest precision of
// every backend) in UTC, so that it survives a round trip exactly.
func ms(t time.Time) time.Time { return t.Truncate(time.Millisecond).UTC() }

// ptr returns a pointer to a millisecond-truncated copy of t.
func ptr(t time.Time) *time.Time {
	v := ms(t)
	return &v
}

// ago returns a millisecond-truncated time d before now.
func ago(d time.Duration) *time.Time { return ptr(time.Now().Add(-d)) }

// near fails unless got is within tolerance of want (for times set by the
// database clock, compared with the test's clock on the same machine).
func near(t *testing.T, what string, got, want time.Time, tolerance time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tolerance || d > tolerance {
		t.Fatalf("%s = %v, want within %v of %v", what, got, tolerance, want)
	}
}

// MigrationNames are the file names of the migrations embedded in fsys
// under dir, in order: what a first Migrate applies.
func MigrationNames(t *testing.T, fsys fs.FS, dir string) []string {
	t.Helper()
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil || len(entries) < 4 {
		t.Fatalf("embedded migrations in %s: %d, %v", dir, len(entries), err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
