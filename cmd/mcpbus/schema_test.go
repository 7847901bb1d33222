package main_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/pressly/goose/v3"

	"github.com/mcpbus/mcpbus/migrations"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/pkg/store/sqlstore"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// knownSchema is the newest migration this build embeds (PostgreSQL).
func knownSchema(t *testing.T) int64 {
	t.Helper()
	entries, err := fs.ReadDir(migrations.Postgres, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var known int64
	for _, e := range entries {
		n, err := strconv.ParseInt(strings.SplitN(e.Name(), "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		known = max(known, n)
	}
	return known
}

// nextRelease applies, to the database of dbURL, this build's migrations
// followed by extra (file name → SQL): what the next release's `mcpbus
// migrate` would do.
func nextRelease(t *testing.T, dbURL string, extra map[string]string) {
	t.Helper()
	dir := t.TempDir()
	entries, err := fs.ReadDir(migrations.Postgres, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(migrations.Postgres, "postgres/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlstore.Migrate(context.Background(), goose.DialectPostgres, db, os.DirFS(dir)); err != nil {
		t.Fatalf("the next release's migrations: %v", err)
	}
}

// TestSchemaVersionRule is a rolling upgrade across a schema change on
// PostgreSQL. With migrations off (database.auto_migrate: false, what the
// deploy examples run, `mcpbus migrate` being a Job), a service refuses an
// unmigrated database, naming both versions and `mcpbus migrate`. Then the
// next release's migrations run, with an expand migration that adds
// columns to mcp_tasks and mcp_audit and declares this release compatible:
// this release's five services start on it and a stdio call (audited to
// mcp_audit) and a durable task (mcp_tasks: submitted, polled, completed)
// work, the rows getting the new columns' defaults; with auto_migrate on
// they start too. A contract migration after it, which declares nothing,
// makes this release refuse to start, naming the database's version and
// its own.
func TestSchemaVersionRule(t *testing.T) {
	ctx := context.Background()
	dbURL := testSchema(t)
	known := knownSchema(t)
	off := config.DatabaseSettings{Backend: config.BackendPostgres, URL: dbURL}
	log := observability.Discard()

	_, err := backends.MigrateAndOpen(ctx, off, log)
	if !errors.Is(err, sqlstore.ErrSchemaMismatch) || !strings.Contains(err.Error(), fmt.Sprintf("version 0, older than the version this mcpbus release needs (%d)", known)) ||
		!strings.Contains(err.Error(), "mcpbus migrate") {
		t.Fatalf("migrations off on an empty database: %v; want a refusal naming versions 0 and %d and mcpbus migrate", err, known)
	}

	expand := known + 1
	nextRelease(t, dbURL, map[string]string{fmt.Sprintf("%05d_next_expand.sql", expand): fmt.Sprintf(`-- +goose Up
ALTER TABLE mcp_tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE mcp_audit ADD COLUMN region TEXT;
INSERT INTO mcpbus_schema_compat (version, compatible_from) VALUES (%d, %d);
-- +goose Down
ALTER TABLE mcp_audit DROP COLUMN region;
ALTER TABLE mcp_tasks DROP COLUMN priority;
`, expand, known)})

	demoPort := freePort(t)
	demo := startProcess(t, t.TempDir(), "demo-http", demoBin, "-transport", "http", "-addr", fmt.Sprintf("127.0.0.1:%d", demoPort))
	t.Cleanup(func() { demo.stop(t) })
	ext := fmt.Sprintf(`{"mcpServers": {
		"demo": {"type": "stdio", "command": %q},
		"reports": {"type": "http", "url": "http://127.0.0.1:%d/mcp", "task_toolsets": [
			{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}
	}}`, demoBin, demoPort)
	st := startStackWith(t, stackOptions{natsURL: envOr("TEST_NATS_URL", "nats://127.0.0.1:4222"), names: testkit.RandomNames(t),
		ext: ext, databaseURL: dbURL, dbSettings: "  auto_migrate: false\n"})

	status, body := httpJSON(t, "POST", st.api+"/api/mcp/tools/demo_echo/call", `{"arguments":{"message":"on the next schema"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "on the next schema") {
		t.Fatalf("a call on the next release's schema: %d %v", status, body)
	}
	const thread = "schema"
	status, body = httpJSON(t, "POST", st.api+"/api/mcp/tools/reports_submit_report/call", `{"arguments":{"topic":"schema","steps":1},"thread_id":"`+thread+`"}`)
	task, _ := body["task"].(map[string]any)
	taskID, _ := task["task_id"].(string)
	if status != 200 || !strings.HasPrefix(taskID, "mcp-task-") {
		t.Fatalf("a task submitted on the next release's schema: %d %v", status, body)
	}
	testkit.Eventually(t, 60*time.Second, "the task to complete on the next release's schema", func() bool {
		_, detail := httpJSON(t, "GET", st.api+"/api/threads/"+thread+"/mcp-tasks/"+taskID, "")
		return detail["status"] == "completed"
	})
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var priority, audited int
	if err := db.QueryRowContext(ctx, `SELECT priority FROM mcp_tasks WHERE id = $1`, taskID).Scan(&priority); err != nil || priority != 0 {
		t.Errorf("the task row this release wrote: priority %d, %v; want the new column's default", priority, err)
	}
	testkit.Eventually(t, 30*time.Second, "the call's audit record in mcp_audit", func() bool {
		return db.QueryRowContext(ctx, `SELECT count(*) FROM mcp_audit WHERE region IS NULL`).Scan(&audited) == nil && audited > 0
	})

	on := off
	on.AutoMigrate = true
	s, err := backends.MigrateAndOpen(ctx, on, log)
	if err != nil {
		t.Fatalf("auto_migrate on against the next release's expand schema: %v", err)
	}
	_ = s.Close()

	contract := known + 2
	nextRelease(t, dbURL, map[string]string{
		fmt.Sprintf("%05d_next_expand.sql", expand):     "-- +goose Up\nSELECT 1;\n",
		fmt.Sprintf("%05d_next_contract.sql", contract): "-- +goose Up\nALTER TABLE mcp_tasks DROP COLUMN priority;\n",
	})
	for what, cfg := range map[string]config.DatabaseSettings{"migrations off": off, "migrations on": on} {
		_, err := backends.MigrateAndOpen(ctx, cfg, log)
		want := fmt.Sprintf("schema is at version %d, newer than this mcpbus release knows (%d)", contract, known)
		if !errors.Is(err, sqlstore.ErrSchemaMismatch) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s, after a contract migration: %v; want a refusal containing %q", what, err, want)
		}
	}
}
