package testkit

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
)

// DefaultTestDatabaseURL is the PostgreSQL server the tests use when
// TEST_DATABASE_URL is unset (trust authentication, as in CI).
const DefaultTestDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// TestDatabaseURL returns TEST_DATABASE_URL, or DefaultTestDatabaseURL: the
// one place tests read it.
func TestDatabaseURL() string {
	return cmp.Or(os.Getenv("TEST_DATABASE_URL"), DefaultTestDatabaseURL)
}

// PostgresSchema creates an empty schema for this test on TEST_DATABASE_URL
// and returns a URL (or keyword/value DSN, as TEST_DATABASE_URL is written)
// whose search_path is that schema, with params added (pool_max_conns, for
// example), and the schema's name. The schema is dropped when the test
// ends; a failed drop fails the test. An unreachable server fails the test:
// PostgreSQL is required, never skipped.
func PostgresSchema(t testing.TB, params map[string]string) (dsn, schema string) {
	t.Helper()
	base := TestDatabaseURL()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema = "mcpbus_test_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{schema}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pgExec(t, ctx, base, "CREATE SCHEMA "+ident)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pgExec(t, ctx, base, "DROP SCHEMA "+ident+" CASCADE")
	})
	all := map[string]string{"search_path": schema}
	maps.Copy(all, params)
	return withParams(t, base, all), schema
}

// pgExec runs one statement on a connection of its own, failing the test on
// any error.
func pgExec(t testing.TB, ctx context.Context, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("PostgreSQL is required by these tests but %s is unreachable (set TEST_DATABASE_URL to a reachable server): %v",
			redactDSN(dsn), err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// redactDSN keeps a URL's scheme, host and path for messages.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "TEST_DATABASE_URL"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// withParams adds connection parameters to a URL or a keyword/value DSN.
func withParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	keys := slices.Sorted(maps.Keys(params))
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("TEST_DATABASE_URL: %v", err)
		}
		q := u.Query()
		for _, k := range keys {
			q.Set(k, params[k])
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	for _, k := range keys {
		dsn += fmt.Sprintf(" %s=%s", k, params[k])
	}
	return dsn
}

// PostgresStore migrates a PostgresSchema (params as there) and opens a
// store on it, closed when the test ends (before the schema is dropped).
func PostgresStore(t testing.TB, params map[string]string) store.Store {
	t.Helper()
	dsn, _ := PostgresSchema(t, params)
	db := config.DatabaseSettings{Backend: config.BackendPostgres, URL: dsn}
	ctx := context.Background()
	if _, err := backends.Migrate(ctx, db, observability.Discard()); err != nil {
		t.Fatalf("migrate postgres: %v", err)
	}
	st, err := backends.Open(ctx, db, observability.Discard())
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
