package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// auditRecords asks GET /api/mcp/audit with key and query and decodes the
// records.
func auditRecords(t *testing.T, e *env, key, query string) (int, []audit.Record) {
	t.Helper()
	status, body := e.raw(t, "GET", "/api/mcp/audit"+query, key, "")
	if status != 200 {
		return status, nil
	}
	var reply struct {
		Records []audit.Record `json:"records"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		t.Fatalf("audit reply %s: %v", body, err)
	}
	return status, reply.Records
}

// rawAudit returns every raw message of the audit stream.
func rawAudit(t *testing.T, e *env) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := e.bus.JS.OrderedConsumer(ctx, e.bus.Names.AuditStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for range info.NumPending {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		sb.WriteString(msg.Subject() + " " + string(msg.Data()) + fmt.Sprint(msg.Headers()) + "\n")
	}
	return sb.String()
}

// A PUT and a PATCH of the config each leave one record: who, the action,
// and which servers and keys changed, never a value (the secrets of the
// old and new file are grepped for in the raw stream).
func TestConfigChangesAreAudited(t *testing.T) {
	t.Parallel()
	const (
		oldSecret = "old-SEKRET-3a1f"
		newSecret = "new-SEKRET-4b2e"
		hdrSecret = "hdr-SEKRET-5c3d"
	)
	doc := fmt.Sprintf(`{"mcpServers": {"a": {"command": "npx", "args": ["pkg"], "env": {"API_KEY": %q}}, "gone": {"command": "npx", "args": ["x"]}}}`, oldSecret)
	e := startWith(t, options{keys: testKeys(), configDoc: doc, audit: true})
	put := fmt.Sprintf(`{"mcp_servers": {"a": {"command": "npx", "args": ["pkg"], "env": {"API_KEY": %q}},
		"web": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": %q}}}}`, newSecret, "Bearer "+hdrSecret)
	if status, body := e.do(t, "PUT", "/api/mcp/config", adminKey, put); status != 200 {
		t.Fatalf("put: %d %v", status, body)
	}
	if status, body := e.do(t, "PATCH", "/api/mcp/config", adminKey, `{"server_name": "web", "enabled": false}`); status != 200 {
		t.Fatalf("patch: %d %v", status, body)
	}
	var recs []audit.Record
	testkit.Eventually(t, 10*time.Second, "two config records", func() bool {
		_, recs = auditRecords(t, e, adminKey, "?kind=config")
		return len(recs) >= 2
	})
	p, q := recs[0], recs[1]
	if p.Kind != audit.KindConfig || p.User != "root" || p.Action != "put_config" || p.Time.IsZero() {
		t.Errorf("put record = %+v", p)
	}
	want := []audit.Change{{Server: "a", Op: "changed", Keys: []string{"env.API_KEY"}}, {Server: "gone", Op: "removed"}, {Server: "web", Op: "added"}}
	if fmt.Sprint(p.Changes) != fmt.Sprint(want) {
		t.Errorf("put changes = %+v, want %+v", p.Changes, want)
	}
	if q.Action != "patch_config" || q.User != "root" || fmt.Sprint(q.Changes) != fmt.Sprint([]audit.Change{{Server: "web", Op: "disabled"}}) {
		t.Errorf("patch record = %+v", q)
	}
	raw := rawAudit(t, e)
	for _, s := range []string{oldSecret, newSecret, hdrSecret, "example.com"} {
		if strings.Contains(raw, s) {
			t.Errorf("the audit stream holds %q:\n%s", s, raw)
		}
	}
}

// Attack: the audit log shows every user's calls, so only admins read it. A
// plain user gets 403 whatever the filters (their own user id included), a
// caller without a key 401; the admin's filters and limit work.
func TestAuditIsAdminOnly(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys()})
	w, err := audit.NewWriter(context.Background(), e.bus.Connect(t), e.bus.Names, audit.WriterOptions{Settings: config.DefaultAudit()})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range []string{"alice", "bob", "alice", "bob", "alice"} {
		w.Write(context.Background(), audit.Record{Kind: audit.KindCall, User: u, Tool: fmt.Sprintf("demo_t%d", i%2), Outcome: "ok"})
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?user=alice", "?user=bob&tool=demo_t1", "?limit=1"} {
		if status, _ := e.raw(t, "GET", "/api/mcp/audit"+q, aliceKey, ""); status != 403 {
			t.Errorf("alice GET /api/mcp/audit%s: %d, want 403", q, status)
		}
		if status, _ := e.raw(t, "GET", "/api/mcp/audit"+q, "", ""); status != 401 {
			t.Errorf("no key GET /api/mcp/audit%s: %d, want 401", q, status)
		}
	}
	if _, recs := auditRecords(t, e, adminKey, ""); len(recs) != 5 {
		t.Errorf("admin, no filter: %d records, want 5", len(recs))
	}
	_, recs := auditRecords(t, e, adminKey, "?user=alice")
	if len(recs) != 3 {
		t.Errorf("user=alice: %+v", recs)
	}
	for _, r := range recs {
		if r.User != "alice" {
			t.Errorf("user=alice returned %+v", r)
		}
	}
	if _, recs := auditRecords(t, e, adminKey, "?tool=demo_t1"); len(recs) != 2 || recs[0].Tool != "demo_t1" {
		t.Errorf("tool=demo_t1: %+v", recs)
	}
	if _, recs := auditRecords(t, e, adminKey, "?limit=2&user=alice"); len(recs) != 2 || recs[1].Tool != "demo_t0" {
		t.Errorf("limit=2: %+v (want the newest two of alice's)", recs)
	}
	if status, _ := e.raw(t, "GET", "/api/mcp/audit?limit=0", adminKey, ""); status != 400 {
		t.Errorf("limit=0: %d, want 400", status)
	}
}

// A user's personal connection changes and an admin's cache reset are
// audited too: who, which connection and which keys, never a value.
func TestPersonalChangesAndResetsAreAudited(t *testing.T) {
	t.Parallel()
	const secret = "psek-audit-77ee"
	e := startWith(t, options{keys: testKeys(), store: sqliteStore(t), personal: testPersonal, audit: true})
	def := func(tok string) string {
		return `{"type": "http", "url": "https://mcp.example/gh", "headers": {"Authorization": "Bearer ` + tok + `"}}`
	}
	if status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "gh", "server": `+def(secret)+`}`); status != 201 {
		t.Fatalf("create: %d %v", status, body)
	}
	if status, body := e.do(t, "POST", "/api/mcp/personal-connections", aliceKey, `{"name": "gh", "server": `+def(secret+"-2")+`}`); status != 200 {
		t.Fatalf("replace: %d %v", status, body)
	}
	if status, body := e.do(t, "DELETE", "/api/mcp/personal-connections/gh", aliceKey, ""); status != 200 {
		t.Fatalf("delete: %d %v", status, body)
	}
	if status, body := e.do(t, "POST", "/api/mcp/cache/reset", adminKey, ""); status != 200 {
		t.Fatalf("reset: %d %v", status, body)
	}
	var recs []audit.Record
	testkit.Eventually(t, 10*time.Second, "four config records", func() bool {
		_, recs = auditRecords(t, e, adminKey, "?kind=config")
		return len(recs) >= 4
	})
	got := ""
	for _, r := range recs {
		got += fmt.Sprintf("%s %s %v; ", r.User, r.Action, r.Changes)
	}
	want := "alice put_personal_connection [{gh added []}]; alice put_personal_connection [{gh changed [headers.Authorization]}]; " +
		"alice delete_personal_connection [{gh removed []}]; root cache_reset []; "
	if got != want {
		t.Errorf("records:\n%s\nwant:\n%s", got, want)
	}
	if raw := rawAudit(t, e); strings.Contains(raw, secret) || strings.Contains(raw, "mcp.example") {
		t.Errorf("the audit stream holds a value:\n%s", raw)
	}
}

// TestCallsPerMinute: GET /api/mcp/stats/calls counts the audited calls of
// the last minutes: every user's for an admin, only the caller's own for
// a user (attack: alice never learns bob's counts, whatever she asks).
func TestCallsPerMinute(t *testing.T) {
	t.Parallel()
	e := startWith(t, options{keys: testKeys()})
	w, err := audit.NewWriter(context.Background(), e.bus.Connect(t), e.bus.Names, audit.WriterOptions{Settings: config.DefaultAudit()})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ user, outcome string }{{"alice", "ok"}, {"bob", "ok"}, {"bob", "tool_error"}, {"alice", "timeout"}, {"bob", "ok"}} {
		w.Write(context.Background(), audit.Record{Kind: audit.KindCall, User: c.user, Tool: fmt.Sprint("demo_t", i), Outcome: c.outcome})
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	totals := func(key, query string) (string, int, int) {
		status, body := e.do(t, "GET", "/api/mcp/stats/calls"+query, key, "")
		if status != 200 {
			t.Fatalf("GET /api/mcp/stats/calls%s: %d %v", query, status, body)
		}
		mins, _ := body["minutes"].([]any)
		calls, errs := 0, 0
		for _, m := range mins {
			mm, _ := m.(map[string]any)
			calls += int(mm["calls"].(float64))
			errs += int(mm["errors"].(float64))
		}
		if want := 10; query == "" && len(mins) != want {
			t.Errorf("default window: %d minutes, want %d", len(mins), want)
		}
		return fmt.Sprint(body["scope"]), calls, errs
	}
	if scope, calls, errs := totals(adminKey, ""); scope != "deployment" || calls != 5 || errs != 2 {
		t.Errorf("admin: %s %d calls %d errors, want deployment 5 2", scope, calls, errs)
	}
	for _, q := range []string{"", "?user=bob", "?minutes=60"} {
		if scope, calls, errs := totals(aliceKey, q); scope != "caller" || calls != 2 || errs != 1 {
			t.Errorf("alice%s: %s %d calls %d errors, want caller 2 1", q, scope, calls, errs)
		}
	}
	for _, bad := range []string{"0", "61", "x"} {
		if status, body := e.do(t, "GET", "/api/mcp/stats/calls?minutes="+bad, adminKey, ""); status != 400 || !strings.Contains(fmt.Sprint(body), "minutes") {
			t.Errorf("minutes=%s: %d %v", bad, status, body)
		}
	}
	if status, _ := e.do(t, "GET", "/api/mcp/stats/calls", "", ""); status != 401 {
		t.Errorf("without a key: %d", status)
	}
}
