package tokens_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/pkg/tokenclient"
	"github.com/mcpbus/mcpbus/services/tokens"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

// clock is a settable clock shared by the replicas of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().UTC()} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixture is one test's world: a bus, a token endpoint, a database and a
// credentials key, shared by the replicas the test starts.
type fixture struct {
	t        *testing.T
	bus      *testkit.Bus
	ep       *tokentest.Endpoint
	db       config.DatabaseSettings
	key      string
	clock    *clock
	logs     *testkit.SyncBuffer
	replicas []*replica
}

const backendPostgres, backendSQLite, backendMemory = config.BackendPostgres, config.BackendSQLite, config.BackendMemory

type tokensConfig = tokens.Config

func newFixture(t *testing.T, backend string, o tokentest.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, bus: testkit.StartBus(t), ep: tokentest.New(t, o), clock: newClock(), logs: &testkit.SyncBuffer{}}
	f.key, _ = crypto.NewKey()
	switch backend {
	case backendPostgres:
		f.db = config.DatabaseSettings{Backend: backendPostgres, URL: pgSchema(t)}
	case backendSQLite:
		f.db = config.DatabaseSettings{Backend: backendSQLite, Path: filepath.Join(t.TempDir(), "db.sqlite")}
	default:
		f.db = config.DatabaseSettings{Backend: config.BackendMemory}
	}
	if _, err := backends.Migrate(context.Background(), f.db, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- logs ---\n%s", f.logs.String())
		}
	})
	return f
}

// oauthServer renders one http server entry with an oauth block for the
// fixture's endpoint; extra is merged into the oauth block.
func (f *fixture) oauthServer(name, grant string, extra string) string {
	o := f.ep.Options()
	block := fmt.Sprintf(`"token_url": %q, "grant_type": %q, "client_id": %q, "client_secret": %q`, f.ep.URL, grant, o.ClientID, o.ClientSecret)
	if grant == config.GrantRefreshToken {
		block += fmt.Sprintf(`, "refresh_token": %q`, o.RefreshToken)
	}
	if extra != "" {
		block += ", " + extra
	}
	return fmt.Sprintf(`%q: {"type": "http", "url": "http://127.0.0.1:1/mcp", "oauth": {%s}}`, name, block)
}

// publish sends the extensions config to the bus and returns it.
func (f *fixture) publish(servers ...string) *config.Extensions {
	f.t.Helper()
	return f.bus.PublishExtensions(f.t, `{"mcpServers": {`+strings.Join(servers, ", ")+`}}`)
}

type replica struct {
	id     string
	svc    *tokens.Service
	store  store.Store
	cancel context.CancelFunc
	done   chan error
	client *tokenclient.Client
}

type replicaOpt func(*tokens.Config, *tokens.Deps)

func withKey(k string) replicaOpt {
	return func(_ *tokens.Config, d *tokens.Deps) {
		s, err := crypto.New(k)
		if err != nil {
			panic(err)
		}
		d.Sealer = s
	}
}

func noKey() replicaOpt { return func(_ *tokens.Config, d *tokens.Deps) { d.Sealer = nil } }

func withConfig(fn func(*tokens.Config)) replicaOpt {
	return func(c *tokens.Config, _ *tokens.Deps) { fn(c) }
}

// start runs one tokens service replica with its own NATS connection and
// its own store handle, and waits until it serves.
func (f *fixture) start(opts ...replicaOpt) *replica {
	f.t.Helper()
	r := f.startNoWait(opts...)
	testkit.Eventually(f.t, 10*time.Second, "the replica to serve", func() bool {
		h, err := bus.Request[bus.HealthReply](context.Background(), f.bus.NC, f.bus.Names.Health(bus.ServiceTokens), struct{}{})
		return err == nil && h.Ready
	})
	return r
}

// startNoWait runs a replica without waiting for it.
func (f *fixture) startNoWait(opts ...replicaOpt) *replica {
	f.t.Helper()
	ctx := context.Background()
	st, err := backends.Open(ctx, f.db, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	id := fmt.Sprintf("replica-%d-%s", len(f.replicas), randHex(3))
	sealer, _ := crypto.New(f.key)
	cfg := tokens.Config{StoreRetryInterval: 50 * time.Millisecond, PollInterval: 20 * time.Millisecond, ConfigWait: 2 * time.Second}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", id)
	deps := tokens.Deps{Log: log, NC: f.bus.Connect(f.t), Names: f.bus.Names, KV: f.bus.KV, Store: st, Sealer: sealer,
		Clock: f.clock.Now, InstanceID: id}
	if st.Backend() != store.BackendMemory {
		deps.Tokens = st.Tokens()
	}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	svc, err := tokens.New(cfg, deps)
	if err != nil {
		f.t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	r := &replica{id: id, svc: svc, store: st, cancel: cancel, done: make(chan error, 1),
		client: tokenclient.New(f.bus.Connect(f.t), f.bus.Names, tokenclient.WithClock(f.clock.Now))}
	go func() { r.done <- svc.Run(runCtx) }()
	f.replicas = append(f.replicas, r)
	f.t.Cleanup(func() { r.stop(f.t) })
	return r
}

func (r *replica) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := testkit.Receive(t, 60*time.Second, "replica "+r.id+" Run to return after its context was cancelled", r.done); err != nil {
		t.Errorf("replica %s: %v", r.id, err)
	}
	_ = r.store.Close()
}

// token asks any replica over the bus.
func (f *fixture) token(server string, force bool) (bus.TokenReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return bus.Request[bus.TokenReply](ctx, f.bus.NC, f.bus.Names.InternalToken(), bus.TokenRequest{Server: server, ForceRefresh: force})
}

func (f *fixture) mustToken(server string) bus.TokenReply {
	f.t.Helper()
	r, err := f.token(server, false)
	if err != nil {
		f.t.Fatalf("token for %s: %v", server, err)
	}
	return r
}

// waitServes waits until some replica knows server (the config arrived).
func (f *fixture) waitServes(server string) {
	f.t.Helper()
	testkit.Eventually(f.t, 10*time.Second, "the config to reach the replicas", func() bool {
		_, err := f.token(server, false)
		e := bus.AsError(err)
		return err == nil || e.Code != bus.CodeNotFound
	})
}

// row reads the stored row through a fresh store handle.
func (f *fixture) row(key string) *store.OAuthToken {
	f.t.Helper()
	st, err := backends.Open(context.Background(), f.db, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	row, err := st.Tokens().GetToken(context.Background(), store.GetTokenParams{Key: key})
	if err != nil {
		return nil
	}
	return row
}

// storedRefreshToken decrypts the row's refresh token with the fixture key.
func (f *fixture) storedRefreshToken(key string) string {
	f.t.Helper()
	row := f.row(key)
	if row == nil || len(row.RefreshTokenEnc) == 0 {
		return ""
	}
	s, _ := crypto.New(f.key)
	b, err := s.Open(row.RefreshTokenEnc, []byte("mcp_oauth_tokens/"+key+"/refresh_token"))
	if err != nil {
		f.t.Fatalf("stored refresh token does not open: %v", err)
	}
	return string(b)
}

// sqlDB opens the fixture's database with database/sql (pgx stdlib is not
// needed: SQLite uses modernc, PostgreSQL a pgx connection).
func (f *fixture) exec(query string) {
	f.t.Helper()
	ctx := context.Background()
	switch f.db.Backend {
	case backendPostgres:
		conn, err := pgx.Connect(ctx, f.db.URL)
		if err != nil {
			f.t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, query); err != nil {
			f.t.Fatalf("%s: %v", query, err)
		}
	case backendSQLite:
		db, err := sql.Open("sqlite", f.db.Path)
		if err != nil {
			f.t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, query); err != nil {
			f.t.Fatalf("%s: %v", query, err)
		}
	}
}

// rawRows returns every column of every token row as text (bytes as-is).
func (f *fixture) rawRows() string {
	f.t.Helper()
	ctx := context.Background()
	var out strings.Builder
	const q = `SELECT * FROM mcp_oauth_tokens`
	switch f.db.Backend {
	case backendPostgres:
		conn, err := pgx.Connect(ctx, f.db.URL)
		if err != nil {
			f.t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, q)
		if err != nil {
			f.t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			raw := rows.RawValues()
			for _, v := range raw {
				out.Write(v)
				out.WriteString("|")
			}
			out.WriteString("\n")
		}
	case backendSQLite:
		db, err := sql.Open("sqlite", f.db.Path)
		if err != nil {
			f.t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			f.t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				f.t.Fatal(err)
			}
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					out.Write(b)
				} else {
					fmt.Fprint(&out, v)
				}
				out.WriteString("|")
			}
			out.WriteString("\n")
		}
	}
	return out.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pgSchema is a testkit.PostgresSchema for this test.
func pgSchema(t *testing.T) string {
	t.Helper()
	dsn, _ := testkit.PostgresSchema(t, nil)
	return dsn
}

// waitFingerprint asks for the server's token with ext's fingerprint until
// the replicas have that config, and returns the reply.
func (f *fixture) waitFingerprint(ext *config.Extensions, server string) bus.TokenReply {
	f.t.Helper()
	var out bus.TokenReply
	fp := ext.Server(server).Fingerprint
	testkit.Eventually(f.t, 10*time.Second, "the replicas to have the new config", func() bool {
		r, err := bus.Request[bus.TokenReply](context.Background(), f.bus.NC, f.bus.Names.InternalToken(), bus.TokenRequest{Server: server, ConfigFingerprint: fp})
		if err != nil && !errors.Is(err, &bus.Error{Code: bus.CodeConfigError}) {
			f.t.Fatalf("token: %v", err)
		}
		out = r
		return err == nil
	})
	return out
}

// failWrites makes the database refuse every write to mcp_oauth_tokens (a
// real trigger), or lifts that.
func (f *fixture) failWrites(on bool) {
	f.t.Helper()
	switch f.db.Backend {
	case backendPostgres:
		if on {
			f.exec(`CREATE OR REPLACE FUNCTION mcpbus_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'writes refused by the test'; END $$`)
			f.exec(`CREATE TRIGGER mcpbus_test_refuse BEFORE INSERT OR UPDATE ON mcp_oauth_tokens FOR EACH ROW EXECUTE FUNCTION mcpbus_test_refuse()`)
		} else {
			f.exec(`DROP TRIGGER mcpbus_test_refuse ON mcp_oauth_tokens`)
		}
	case backendSQLite:
		if on {
			f.exec(`CREATE TRIGGER mcpbus_test_refuse_i BEFORE INSERT ON mcp_oauth_tokens BEGIN SELECT RAISE(ABORT, 'writes refused by the test'); END`)
			f.exec(`CREATE TRIGGER mcpbus_test_refuse_u BEFORE UPDATE ON mcp_oauth_tokens BEGIN SELECT RAISE(ABORT, 'writes refused by the test'); END`)
		} else {
			f.exec(`DROP TRIGGER mcpbus_test_refuse_i`)
			f.exec(`DROP TRIGGER mcpbus_test_refuse_u`)
		}
	}
}
