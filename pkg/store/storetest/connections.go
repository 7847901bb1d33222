package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// ExerciseConnections checks every ConnectionStore method.
func ExerciseConnections(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.ConnectionStore)
	}{
		{"CRUD", testConnectionCRUD},
		{"Invalid", testConnectionInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t).Connections())
		})
	}
}

func sameConnection(t *testing.T, what string, got, want store.PersonalConnection) {
	t.Helper()
	got.Definition, want.Definition = canonicalJSON(t, got.Definition), canonicalJSON(t, want.Definition)
	if g, w := render(got), render(want); g != w {
		t.Fatalf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

func names(conns []store.PersonalConnection) []string {
	out := make([]string, len(conns))
	for i, c := range conns {
		out[i] = c.UserID + "/" + c.Name
	}
	return out
}

func testConnectionCRUD(t *testing.T, s store.ConnectionStore) {
	ctx := t.Context()
	now := time.Now()

	_, err := s.GetConnection(ctx, store.ConnectionParams{UserID: "u1", Name: "a"})
	wantErr(t, "GetConnection of a missing connection", err, store.ErrNotFound)
	list, err := s.ListConnections(ctx, store.ListConnectionsParams{UserID: "u1"})
	must(t, "ListConnections of nobody", err)
	if list == nil || len(list) != 0 {
		t.Fatalf("ListConnections with no rows = %#v, want an empty, non-nil slice", list)
	}

	put := func(user, name, def string) *store.PersonalConnection {
		t.Helper()
		c := &store.PersonalConnection{UserID: user, Name: name, RuntimeName: user + "__" + name,
			Definition: json.RawMessage(def)}
		must(t, "PutConnection "+user+"/"+name, putConnection(ctx, s, c))
		return c
	}
	b := put("u1", "b", `{"type": "http", "url": "https://b.example/mcp"}`)
	a := put("u1", "a", `{"type":"stdio","command":"npx","args":["-y","server"]}`)
	put("u2", "a", `{"type":"sse","url":"https://u2.example/sse"}`)
	near(t, "created_at", a.CreatedAt, now, time.Minute)
	if !a.UpdatedAt.Equal(a.CreatedAt) {
		t.Errorf("a new connection has created_at %v and updated_at %v", a.CreatedAt, a.UpdatedAt)
	}

	got, err := s.GetConnection(ctx, store.ConnectionParams{UserID: "u1", Name: "b"})
	must(t, "GetConnection u1/b", err)
	sameConnection(t, "GetConnection u1/b", *got, *b)

	list, err = s.ListConnections(ctx, store.ListConnectionsParams{UserID: "u1"})
	must(t, "ListConnections u1", err)
	if want := []string{"u1/a", "u1/b"}; !slices.Equal(names(list), want) {
		t.Fatalf("ListConnections u1 = %v, want %v", names(list), want)
	}
	sameConnection(t, "listed u1/a", list[0], *a)

	// Replace: created_at stays, the rest changes.
	a2 := &store.PersonalConnection{UserID: "u1", Name: "a", RuntimeName: "renamed",
		Definition: json.RawMessage(`{"type":"http","url":"https://new.example/mcp"}`)}
	must(t, "PutConnection replace", putConnection(ctx, s, a2))
	if !a2.CreatedAt.Equal(a.CreatedAt) || a2.UpdatedAt.Before(a.UpdatedAt) {
		t.Fatalf("replace: created_at %v (was %v), updated_at %v (was %v)",
			a2.CreatedAt, a.CreatedAt, a2.UpdatedAt, a.UpdatedAt)
	}
	got, err = s.GetConnection(ctx, store.ConnectionParams{UserID: "u1", Name: "a"})
	must(t, "GetConnection after replace", err)
	sameConnection(t, "GetConnection after replace", *got, *a2)

	must(t, "DeleteConnection", s.DeleteConnection(ctx, store.ConnectionParams{UserID: "u1", Name: "a"}))
	_, err = s.GetConnection(ctx, store.ConnectionParams{UserID: "u1", Name: "a"})
	wantErr(t, "GetConnection after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteConnection again", s.DeleteConnection(ctx, store.ConnectionParams{UserID: "u1", Name: "a"}), store.ErrNotFound)
	if _, err := s.GetConnection(ctx, store.ConnectionParams{UserID: "u2", Name: "a"}); err != nil {
		t.Fatalf("deleting u1/a touched u2/a: %v", err)
	}
}

func testConnectionInvalid(t *testing.T, s store.ConnectionStore) {
	ctx := t.Context()
	for name, c := range map[string]store.PersonalConnection{
		"no user":         {Name: "a", RuntimeName: "r", Definition: json.RawMessage(`{}`)},
		"no name":         {UserID: "u", RuntimeName: "r", Definition: json.RawMessage(`{}`)},
		"no runtime name": {UserID: "u", Name: "a", Definition: json.RawMessage(`{}`)},
		"no definition":   {UserID: "u", Name: "a", RuntimeName: "r"},
		"bad JSON":        {UserID: "u", Name: "a", RuntimeName: "r", Definition: json.RawMessage(`{`)},
	} {
		wantErr(t, name, putConnection(ctx, s, &c), store.ErrInvalid)
	}
}

// putConnection stores c and copies the stored row back into it.
func putConnection(ctx context.Context, s store.ConnectionStore, c *store.PersonalConnection) error {
	got, err := s.PutConnection(ctx, store.PutConnectionParams{Connection: *c})
	if err == nil {
		*c = *got
	}
	return err
}
