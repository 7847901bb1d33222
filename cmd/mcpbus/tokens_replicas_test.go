package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/replica"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

// tokensProcess starts `mcpbus serve tokens` in dir with extra environment.
func tokensProcess(t *testing.T, dir, name string, env ...string) *process {
	t.Helper()
	p := &process{name: name, cmd: exec.Command(mcpbusBin, "serve", "tokens"), out: &testkit.SyncBuffer{}}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_NATS_NAMESPACE=", "MCPBUS_DATABASE_URL=", "MCPBUS_CREDENTIALS_KEY=", "DEER_FLOW_CREDENTIALS_KEY=")
	p.cmd.Env = append(p.cmd.Env, env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

func writeTokensConfig(t *testing.T, dir string, b *testkit.Bus, dbURL string, ep *tokentest.Endpoint) {
	t.Helper()
	o := ep.Options()
	ext := fmt.Sprintf(`{"mcpServers": {"secure": {"type": "http", "url": "http://127.0.0.1:1/mcp", "oauth": {
		"token_url": %q, "grant_type": "refresh_token", "client_id": %q, "client_secret": %q, "refresh_token": %q}}}}`,
		ep.URL, o.ClientID, o.ClientSecret, o.RefreshToken)
	settings := natsSettings(b.URL, b.Names) + fmt.Sprintf("database:\n  backend: postgres\n  url: %q\ndeployment:\n  multi_instance: true\n", dbURL)
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTokensReplicasAsProcesses runs three `mcpbus serve tokens` processes
// on one NATS and one PostgreSQL. 150 concurrent requests at the moment the
// access token expires make exactly one refresh; then the lease holder is
// killed in the middle of its token request and another replica completes
// the refresh once the 30-second lease has expired, with the chain intact.
func TestTokensReplicasAsProcesses(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	dbURL := testSchema(t)
	dir := t.TempDir()
	ep := tokentest.New(t, tokentest.Options{ExpiresIn: 61}) // refresh_skew_seconds 60: stale one second after issue
	writeTokensConfig(t, dir, b, dbURL, ep)
	key, _ := crypto.NewKey()
	var procs []*process
	for i := range 3 {
		procs = append(procs, tokensProcess(t, dir, fmt.Sprintf("tokens-%d", i), "MCPBUS_CREDENTIALS_KEY="+key))
	}
	testkit.Eventually(t, 60*time.Second, "three tokens replicas", func() bool { return len(tokenInstances(t, b.NC, b.Names)) == 3 })

	ask := func() (bus.TokenReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return bus.Request[bus.TokenReply](ctx, b.NC, b.Names.InternalToken(), bus.TokenRequest{Server: "secure"})
	}
	first, err := ask()
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the access token to enter its refresh window", func() bool {
		return time.Now().After(first.ExpiresAt.Add(-60 * time.Second))
	})

	// 150 concurrent requests, one refresh.
	ep.SetExpiresIn(3600)
	gate := ep.Hold()
	const n = 150
	var wg sync.WaitGroup
	results := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := ask()
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			results <- r.Value
		}()
	}
	testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived)
	gate.Release()
	ep.Unhold()
	wg.Wait()
	close(results)
	var second string
	for v := range results {
		if second == "" {
			second = v
		}
		if v != second || v == first.Value || strings.HasPrefix(v, "error") {
			t.Fatalf("a caller got %q (first answer %q, old %q)", v, second, first.Value)
		}
	}
	if c := ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 || c.Calls != 2 {
		t.Fatalf("endpoint counts %+v, want exactly one refresh for 150 concurrent requests", c)
	}
	for id, served := range tokenInstances(t, b.NC, b.Names) {
		if served == 0 {
			t.Errorf("replica %s served no request", id)
		}
	}

	// Kill the lease holder mid-request.
	force := func(timeout time.Duration) (bus.TokenReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return bus.Request[bus.TokenReply](ctx, b.NC, b.Names.InternalToken(), bus.TokenRequest{Server: "secure", ForceRefresh: true})
	}
	gate = ep.Hold()
	killed := make(chan error, 1)
	go func() { _, err := force(5 * time.Second); killed <- err }()
	testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived)
	ep.Unhold()
	owner := leaseOwner(t, dbURL)
	pid := ownerPID(owner)
	var victim *process
	for _, p := range procs {
		if p.cmd.Process.Pid == pid {
			victim = p
		}
	}
	if victim == nil {
		t.Fatalf("lease owner %q is none of the replicas", owner)
	}
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	_ = victim.cmd.Wait()

	// A surviving replica waits for the dead holder's lease (30 s), then
	// refreshes from the stored chain.
	third, err := force(90 * time.Second)
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	if third.Value == second {
		t.Fatal("no new token after the holder died")
	}
	if c := ep.Counts(); c.Refreshes != 3 || c.InvalidGrants != 0 {
		t.Fatalf("endpoint counts %+v: the chain broke", c)
	}
	if got := storedRefreshToken(t, dbURL, key); got != ep.CurrentRefreshToken() {
		t.Fatal("the stored chain is not the endpoint's current refresh token")
	}
	gate.Release()
	testkit.Receive(t, 60*time.Second, "the dead replica's caller to return", killed) // the dead replica's caller got no answer

	// Nothing secret in the processes' output or the table.
	raw := rawTokenTable(t, dbURL)
	for _, sec := range ep.Secrets() {
		for _, p := range procs {
			if strings.Contains(p.out.String(), sec) {
				t.Errorf("%s logged a secret", p.name)
			}
		}
		if strings.Contains(raw, sec) {
			t.Error("the token table holds a secret in plain text")
		}
	}
	for _, p := range procs {
		if p != victim {
			p.stop(t)
		}
	}
}

// TestTokensMultiInstanceWithoutKeyRefusesToStart: deployment.multi_instance
// with a refresh_token server and no credentials key exits with a message
// that says what to set.
func TestTokensMultiInstanceWithoutKeyRefusesToStart(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	dir := t.TempDir()
	writeTokensConfig(t, dir, b, testSchema(t), tokentest.New(t, tokentest.Options{}))
	p := tokensProcess(t, dir, "tokens")
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		out := p.out.String()
		if err == nil || !strings.Contains(out, "MCPBUS_CREDENTIALS_KEY") || !strings.Contains(out, "multi_instance") || !strings.Contains(out, "secure") {
			t.Fatalf("exit %v:\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the tokens service started without a credentials key in a multi-instance deployment")
	}
}

// tokenInstances returns, per running tokens replica, how many token
// requests it served (micro stats).
func tokenInstances(t *testing.T, nc *nats.Conn, names bus.Names) map[string]int {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subj, _ := micro.ControlSubject(micro.StatsVerb, names.Service(bus.ServiceTokens), "")
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			return out
		}
		var st micro.Stats
		if json.Unmarshal(m.Data, &st) != nil {
			continue
		}
		out[st.ID] = 0
		for _, e := range st.Endpoints {
			if e.Subject == names.InternalToken() {
				out[st.ID] = e.NumRequests
			}
		}
	}
}

func leaseOwner(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var owner *string
	if err := conn.QueryRow(ctx, `SELECT lease_owner FROM mcp_oauth_tokens WHERE connection_key = 'secure'`).Scan(&owner); err != nil || owner == nil {
		t.Fatalf("lease owner: %v", err)
	}
	return *owner
}

// ownerPID reads the pid from a lease owner "host:pid:random".
func ownerPID(owner string) int { return replica.PID(owner) }

func storedRefreshToken(t *testing.T, dbURL, key string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var enc []byte
	if err := conn.QueryRow(ctx, `SELECT refresh_token_enc FROM mcp_oauth_tokens WHERE connection_key = 'secure'`).Scan(&enc); err != nil {
		t.Fatal(err)
	}
	s, _ := crypto.New(key)
	pt, err := s.Open(enc, []byte("mcp_oauth_tokens/secure/refresh_token"))
	if err != nil {
		t.Fatal(err)
	}
	return string(pt)
}

func rawTokenTable(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT * FROM mcp_oauth_tokens`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		for _, v := range rows.RawValues() {
			sb.Write(v)
			sb.WriteByte('|')
		}
	}
	return sb.String()
}
