package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// ExerciseAudit checks the AuditStore: insert, list with filters and
// limit, prune.
func ExerciseAudit(t *testing.T, newStore NewStore) {
	t.Helper()
	t.Run("InsertListPrune", func(t *testing.T) {
		t.Parallel()
		testAudit(t, newStore(t).Audit())
	})
}

func testAudit(t *testing.T, s store.AuditStore) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	recs := []store.AuditRecord{
		{Time: old, Kind: "call", UserID: "alice", Tool: "demo_echo", Outcome: "ok"},
		{Time: now.Add(-3 * time.Second), Kind: "call", UserID: "alice", ThreadID: "th", Tool: "demo_echo", ServerName: "demo",
			Transport: "http", Outcome: "tool_error", DurationMS: 12.5, ResultBytes: 42, RequestID: "req-1", TraceID: "abc",
			Arguments: json.RawMessage(`{"q":"***"}`), ArgumentsTruncated: true, VirtualServer: "agent-a", Policy: "virtual_servers[agent-a].quotas[0]"},
		{Time: now.Add(-2 * time.Second), Kind: "call", UserID: "bob", Tool: "demo_add", Outcome: "ok"},
		{Time: now.Add(-time.Second), Kind: "config", UserID: "admin", Action: "put_config",
			Changes: json.RawMessage(`[{"server":"demo","op":"changed","keys":["url"]}]`)},
	}
	must(t, "InsertAuditRecords", s.InsertAuditRecords(ctx, store.InsertAuditRecordsParams{Records: recs}))
	if err := s.InsertAuditRecords(ctx, store.InsertAuditRecordsParams{Records: []store.AuditRecord{{Kind: "call"}}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("insert without a time: %v, want ErrInvalid", err)
	}

	list := func(p store.ListAuditRecordsParams) []store.AuditRecord {
		t.Helper()
		got, err := s.ListAuditRecords(ctx, p)
		must(t, "ListAuditRecords", err)
		return got
	}
	users := func(rs []store.AuditRecord) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.UserID+"/"+r.Kind)
		}
		return out
	}
	if got := users(list(store.ListAuditRecordsParams{Limit: 10})); !slices.Equal(got, []string{"alice/call", "alice/call", "bob/call", "admin/config"}) {
		t.Fatalf("all records, oldest first: %v", got)
	}
	if got := users(list(store.ListAuditRecordsParams{Limit: 2})); !slices.Equal(got, []string{"bob/call", "admin/config"}) {
		t.Fatalf("the newest 2: %v", got)
	}
	if got := users(list(store.ListAuditRecordsParams{Kind: "config", Limit: 10})); !slices.Equal(got, []string{"admin/config"}) {
		t.Fatalf("kind config: %v", got)
	}
	if got := users(list(store.ListAuditRecordsParams{Tool: "demo_add", Limit: 10})); !slices.Equal(got, []string{"bob/call"}) {
		t.Fatalf("tool demo_add: %v", got)
	}
	got := list(store.ListAuditRecordsParams{UserID: "alice", Since: now.Add(-time.Hour), Limit: 10})
	if len(got) != 1 {
		t.Fatalf("alice since an hour ago: %v", users(got))
	}
	want := recs[1]
	want.ID = got[0].ID
	if got[0].ID == 0 || !sameJSON(t, got[0].Arguments, want.Arguments) {
		t.Fatalf("stored record %s, want %s", render(got[0]), render(want))
	}
	got[0].Arguments, want.Arguments = nil, nil
	if render(got[0]) != render(want) {
		t.Fatalf("stored record\ngot  %s\nwant %s", render(got[0]), render(want))
	}
	if c := list(store.ListAuditRecordsParams{Kind: "config", Limit: 1})[0]; !sameJSON(t, c.Changes, recs[3].Changes) || c.Action != "put_config" {
		t.Fatalf("config record: %s", render(c))
	}
	if _, err := s.ListAuditRecords(ctx, store.ListAuditRecordsParams{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("list without a limit: %v, want ErrInvalid", err)
	}

	n, err := s.PruneAuditRecords(ctx, store.PruneAuditRecordsParams{Before: now.Add(-24 * time.Hour)})
	must(t, "PruneAuditRecords", err)
	if n != 1 {
		t.Fatalf("pruned %d records, want the one older than a day", n)
	}
	if n, err = s.PruneAuditRecords(ctx, store.PruneAuditRecordsParams{Before: now.Add(-24 * time.Hour)}); err != nil || n != 0 {
		t.Fatalf("second prune: %d, %v; want 0, nil", n, err)
	}
	if got := users(list(store.ListAuditRecordsParams{Limit: 10})); len(got) != 3 {
		t.Fatalf("after the prune: %v", got)
	}
}
