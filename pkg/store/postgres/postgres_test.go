package postgres_test

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpbus/mcpbus/migrations"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/postgres"
	"github.com/mcpbus/mcpbus/pkg/store/storetest"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func testURL() string { return testkit.TestDatabaseURL() }

func testLogger(t *testing.T) *slog.Logger { return testkit.Logger(t) }

// connect opens an administrative connection, failing (never skipping) the
// test when PostgreSQL is unreachable: CI provides it.
func connect(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatalf("PostgreSQL is required by these tests but %s is unreachable "+
			"(set TEST_DATABASE_URL to a reachable server): %v", postgres.RedactURL(testURL()), err)
	}
	return conn
}

// testSchema is testkit.PostgresSchema with a small pool.
func testSchema(t *testing.T) (dsn, schema string) {
	t.Helper()
	return testkit.PostgresSchema(t, map[string]string{"pool_max_conns": "4"})
}

// newStore migrates a fresh schema and opens a store on it.
func newStore(t *testing.T) store.Store {
	t.Helper()
	dsn, _ := testSchema(t)
	if _, err := postgres.Migrate(t.Context(), dsn, testLogger(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s, err := postgres.Open(t.Context(), dsn, testLogger(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, newStore)
}

// TestMigrateConcurrent starts three migrations of one schema together, as
// replicas starting at once would: all succeed and the migration is applied
// exactly once.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	dsn, schema := testSchema(t)
	const replicas = 3
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		applied = make([][]string, replicas)
		errs    = make([]error, replicas)
	)
	for i := range replicas {
		wg.Go(func() {
			<-start
			applied[i], errs[i] = postgres.Migrate(t.Context(), dsn, testLogger(t))
		})
	}
	close(start)
	wg.Wait()
	var all []string
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: Migrate: %v", i, errs[i])
		}
		all = append(all, applied[i]...)
	}
	want := storetest.MigrationNames(t, migrations.Postgres, "postgres")
	if !slices.Equal(all, want) {
		t.Fatalf("the replicas applied %v together, want %v once", all, want)
	}

	conn := connect(t, t.Context())
	defer conn.Close(t.Context())
	var version int64
	var rows int
	err := conn.QueryRow(t.Context(), `SELECT max(version_id), count(*) FILTER (WHERE version_id = 1) FROM `+
		pgx.Identifier{schema, "goose_db_version"}.Sanitize()).Scan(&version, &rows)
	if err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	newest, _ := strconv.ParseInt(strings.SplitN(want[len(want)-1], "_", 2)[0], 10, 64)
	if version != newest || rows != 1 {
		t.Fatalf("schema at version %d with %d rows for version 1, want version %d and version 1 recorded once", version, rows, newest)
	}

	again, err := postgres.Migrate(t.Context(), dsn, testLogger(t))
	if err != nil || len(again) != 0 {
		t.Fatalf("a later Migrate applied %v (error %v), want nothing", again, err)
	}
}

func TestOpenUnreachableRedactsPassword(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pw"
	for _, dsn := range []string{
		"postgres://mcpbus:" + password + "@127.0.0.1:1/mcpbus?sslmode=disable&connect_timeout=5",
		"host=127.0.0.1 port=1 user=mcpbus password=" + password + " dbname=mcpbus sslmode=disable connect_timeout=5",
		"postgres://mcpbus:" + password + "@127.0.0.1:1/mcpbus?sslmode=bogus",
	} {
		_, err := postgres.Open(t.Context(), dsn, nil)
		if err == nil {
			t.Fatalf("Open(%s) succeeded", postgres.RedactURL(dsn))
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("the error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "postgres") {
			t.Fatalf("the error does not name the backend: %v", err)
		}
		_, err = postgres.Migrate(t.Context(), dsn, nil)
		if err == nil || strings.Contains(err.Error(), password) {
			t.Fatalf("Migrate error = %v, want a failure without the password", err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgresql://u@h/db":                       "postgresql://u@h/db",
		"postgres://u@h/db?password=pw":             "postgres://u@h/db?password=xxxxx",
		"host=h user=u password=pw dbname=db":       "host=h user=u password=xxxxx dbname=db",
		"host=h password='p w' dbname=db":           "host=h password=xxxxx dbname=db",
		"host=h dbname=db":                          "host=h dbname=db",
	} {
		if got := postgres.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPingAndPool(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(t.Context(), testURL(), testLogger(t))
	if err != nil {
		t.Fatalf("Open %s: %v", postgres.RedactURL(testURL()), err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	var app string
	if err := s.Pool().QueryRow(t.Context(), "SHOW application_name").Scan(&app); err != nil || app != "mcpbus" {
		t.Fatalf("application_name = %q (%v), want mcpbus", app, err)
	}
}
