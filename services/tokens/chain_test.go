package tokens_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

var sqlBackends = []string{backendSQLite, backendPostgres}

func TestRotationIsStoredAndARestartContinuesTheChain(t *testing.T) {
	t.Parallel()
	for _, backend := range sqlBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, backend, tokentest.Options{})
			f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
			a := f.start()
			first := f.mustToken("s")
			row := f.row("s")
			if row == nil || len(row.Fingerprint) != 64 || row.RequestShapeHash == "" || row.ExpiresAt == nil || row.TokenType != "Bearer" || row.LeaseOwner != "" {
				t.Fatalf("stored row %+v", row)
			}
			if got := f.storedRefreshToken("s"); got != f.ep.CurrentRefreshToken() {
				t.Fatal("the stored refresh token is not the rotated one")
			}
			a.stop(t)

			// A restart before expiry reuses the stored access token.
			f.start()
			if again := f.mustToken("s"); again.Value != first.Value {
				t.Fatal("the restarted replica did not reuse the stored access token")
			}
			// After expiry it refreshes from the stored chain, never the spent seed.
			for range 3 {
				f.clock.Advance(2 * time.Hour)
				f.mustToken("s")
			}
			if c := f.ep.Counts(); c.Refreshes != 4 || c.InvalidGrants != 0 || c.Calls != 4 {
				t.Fatalf("endpoint counts %+v, want 4 refreshes and no invalid_grant", c)
			}
			if f.storedRefreshToken("s") != f.ep.CurrentRefreshToken() {
				t.Fatal("the stored chain is behind the endpoint")
			}
		})
	}
}

// TestReplicasRefreshOnce: three replicas (own NATS connection, own store
// handle) and 150 concurrent requests at the moment the access token
// expires make exactly one refresh.
func TestReplicasRefreshOnce(t *testing.T) {
	t.Parallel()
	for _, backend := range sqlBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, backend, tokentest.Options{})
			f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
			for range 3 {
				f.start()
			}
			old := f.mustToken("s")
			f.clock.Advance(time.Hour) // now inside the skew window: every replica must refresh
			gate := f.ep.Hold()
			const n = 150
			var wg sync.WaitGroup
			values := make(chan string, n)
			errs := make(chan error, n)
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := f.token("s", false)
					values <- r.Value
					errs <- err
				}()
			}
			testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived) // the one refresh is at the endpoint, held
			gate.Release()
			wg.Wait()
			close(values)
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var got string
			for v := range values {
				if got == "" {
					got = v
				}
				if v != got || v == old.Value {
					t.Fatalf("callers got different or old tokens: %q vs %q", v, got)
				}
			}
			if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 {
				t.Fatalf("endpoint counts %+v, want exactly one refresh for the rotation", c)
			}
			if row := f.row("s"); row.LeaseOwner != "" {
				t.Fatalf("lease left behind: %+v", row)
			}
		})
	}
}

// TestLeaseHolderDiesAnotherReplicaCompletes: the holder loses its database
// and its process mid-request; after the lease expires another replica
// refreshes from the stored chain.
func TestLeaseHolderDiesAnotherReplicaCompletes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendPostgres, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	short := withConfig(func(c *tokensConfig) { c.LeaseTTL = 1500 * time.Millisecond; c.StopTimeout = 50 * time.Millisecond })
	replicas := []*replica{f.start(short), f.start(short)}
	f.mustToken("s")
	f.clock.Advance(time.Hour)
	gate := f.ep.Hold()
	done := make(chan error, 10)
	for range 10 {
		go func() { _, err := f.token("s", false); done <- err }()
	}
	testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived)
	holder := f.row("s").LeaseOwner
	var dead *replica
	for _, r := range replicas {
		if r.id == holder {
			dead = r
		}
	}
	if dead == nil {
		t.Fatalf("lease owner %q is no replica", holder)
	}
	f.ep.Unhold()
	// Crash: the database goes first (no release is possible), then the process.
	_ = dead.store.Close()
	dead.cancel()
	testkit.Receive(t, 60*time.Second, "the crashed replica's Run to return", dead.done)
	dead.cancel = nil
	testkit.Eventually(t, 20*time.Second, "another replica to finish the refresh", func() bool {
		return f.ep.Counts().Refreshes == 2
	})
	// Callers on the surviving replica got the new token; the dead one's callers failed.
	v := f.mustToken("s")
	if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 {
		t.Fatalf("counts %+v", c)
	}
	if f.storedRefreshToken("s") != f.ep.CurrentRefreshToken() || !strings.HasPrefix(v.Value, "Bearer at-") {
		t.Fatal("the chain is not intact")
	}
	for range 10 {
		testkit.Receive(t, 60*time.Second, "the waiting token requests to finish", done)
	}
	gate.Release() // only now: the dead replica's request never completes
}

func TestFingerprintChangeRestartsTheChainSecretChangeKeepsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start()
	f.mustToken("s")
	fp1 := f.row("s").Fingerprint

	// Only client_secret changes: the stored chain continues.
	f.ep.SetClientSecret("cs-new-" + randHex(8))
	ext := f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.clock.Advance(2 * time.Hour)
	f.waitFingerprint(ext, "s")
	if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 {
		t.Fatalf("after a secret change: %+v", c)
	}
	if f.row("s").Fingerprint != fp1 {
		t.Fatal("a secret change changed the fingerprint")
	}

	// A new seed: the chain starts again from it (the stored token would be refused).
	newSeed := "seed-rt-2-" + randHex(8)
	f.ep.SetRefreshToken(newSeed)
	ext = f.publish(strings.Replace(f.oauthServer("s", config.GrantRefreshToken, ""), f.ep.Options().RefreshToken, newSeed, 1))
	f.waitFingerprint(ext, "s")
	if c := f.ep.Counts(); c.Refreshes != 3 || c.InvalidGrants != 0 {
		t.Fatalf("after a seed change: %+v", c)
	}
	if got := f.ep.Forms(); got[len(got)-1].Get("refresh_token") != newSeed {
		t.Fatal("the new chain did not start from the configured seed")
	}
	if f.row("s").Fingerprint == fp1 {
		t.Fatal("the fingerprint did not change with the seed")
	}
}

func TestRequestShapeChangeRefreshesFromTheStoredToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start()
	a := f.mustToken("s")
	ext := f.publish(f.oauthServer("s", config.GrantRefreshToken, `"extra_token_params": {"resource": "https://other"}`))
	b := f.waitFingerprint(ext, "s")
	if a.Value == b.Value {
		t.Fatal("an access token was reused across request shapes")
	}
	forms := f.ep.Forms()
	if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 || forms[1].Get("resource") != "https://other" {
		t.Fatalf("counts %+v, form %v", c, forms[1])
	}
}

func TestStoreFailureKeepsTokensRetriesAndStoresBeforeTheNextRefresh(t *testing.T) {
	t.Parallel()
	for _, backend := range sqlBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, backend, tokentest.Options{})
			f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
			f.start(withConfig(func(c *tokensConfig) { c.StoreRetryInterval = 100 * time.Millisecond }))
			f.mustToken("s")
			f.clock.Advance(time.Hour)

			gate := f.ep.Hold()
			got := make(chan bus.TokenReply, 1)
			go func() { r, _ := f.token("s", false); got <- r }()
			testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived)
			f.failWrites(true) // the database refuses writes while the refresh runs
			f.ep.Unhold()
			gate.Release()
			fresh := testkit.Receive(t, 60*time.Second, "the token request to return", got)
			if fresh.Value == "" {
				t.Fatal("the new token was not handed out although it could not be stored")
			}
			// Still served from memory while unstored.
			if r := f.mustToken("s"); r.Value != fresh.Value {
				t.Fatal("the unstored token is not served")
			}
			// The next refresh is refused until the tokens are stored.
			f.clock.Advance(time.Hour)
			_, err := f.token("s", false)
			if !errors.Is(err, bus.ErrUnavailable) {
				t.Fatalf("refresh while the previous tokens are unstored: %v, want unavailable", err)
			}
			if c := f.ep.Counts(); c.Refreshes != 2 {
				t.Fatalf("a refresh was made with unstored tokens: %+v", c)
			}
			f.failWrites(false)
			testkit.Eventually(t, 10*time.Second, "the retry to store the tokens", func() bool {
				return f.storedRefreshToken("s") == f.ep.CurrentRefreshToken()
			})
			if r := f.mustToken("s"); r.Value == fresh.Value {
				t.Fatal("no refresh after the store came back")
			}
			if c := f.ep.Counts(); c.Refreshes != 3 || c.InvalidGrants != 0 {
				t.Fatalf("counts %+v", c)
			}
		})
	}
}

func TestUnreadableDatabaseRefusesToRefreshButValidTokensWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendPostgres, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start()
	a := f.mustToken("s")
	f.exec(`ALTER TABLE mcp_oauth_tokens RENAME TO mcp_oauth_tokens_away`)
	if r := f.mustToken("s"); r.Value != a.Value {
		t.Fatal("a still-valid token stopped working")
	}
	f.clock.Advance(2 * time.Hour)
	_, err := f.token("s", false)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUnavailable || !strings.Contains(be.Message, "MCP server 's'") {
		t.Fatalf("err = %v", err)
	}
	if c := f.ep.Counts(); c.Calls != 1 {
		t.Fatalf("the endpoint was called without a database: %+v", c)
	}
	f.exec(`ALTER TABLE mcp_oauth_tokens_away RENAME TO mcp_oauth_tokens`)
	f.mustToken("s")
	if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 {
		t.Fatalf("counts %+v", c)
	}
}

func TestInvalidGrantMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("secure", config.GrantRefreshToken, ""))
	a := f.start()
	f.mustToken("secure") // the seed is spent; the chain is stored under the fixture key
	a.stop(t)

	// Another key cannot open the chain: this replica falls back to the spent seed.
	other, _ := crypto.NewKey()
	f.start(withKey(other))
	f.clock.Advance(2 * time.Hour)
	_, err := f.token("secure", false)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeOAuthFailed {
		t.Fatalf("err = %v", err)
	}
	want := "MCP server 'secure': the OAuth provider rejected the refresh token (invalid_grant). Configure a new refresh_token for this server. " +
		"This instance could not decrypt the refresh-token chain another instance stored and fell back to the configured refresh_token: every instance needs the same MCPBUS_CREDENTIALS_KEY (or DEER_FLOW_CREDENTIALS_KEY)."
	if be.Message != want {
		t.Fatalf("message:\n%s\nwant:\n%s", be.Message, want)
	}

	// A revoked chain without a key problem: the plain message.
	g := newFixture(t, backendSQLite, tokentest.Options{})
	g.publish(g.oauthServer("secure", config.GrantRefreshToken, ""))
	g.ep.SetRefreshToken("revoked-" + randHex(4))
	g.start()
	_, err = g.token("secure", false)
	if !errors.As(err, &be) || be.Code != bus.CodeOAuthFailed ||
		be.Message != "MCP server 'secure': the OAuth provider rejected the refresh token (invalid_grant). Configure a new refresh_token for this server." {
		t.Fatalf("err = %v", err)
	}
}

func TestSavingAConfigWithoutTheServerDeletesItsRowDisablingKeepsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""), f.oauthServer("gone", config.GrantRefreshToken, ""))
	f.start()
	f.mustToken("s")
	f.ep.SetRefreshToken(f.ep.Options().RefreshToken) // let "gone" start from the same seed
	f.mustToken("gone")
	if f.row("s") == nil || f.row("gone") == nil {
		t.Fatal("rows missing")
	}
	disabled := strings.Replace(f.oauthServer("s", config.GrantRefreshToken, ""), `"type": "http"`, `"enabled": false, "type": "http"`, 1)
	f.publish(disabled)
	testkit.Eventually(t, 10*time.Second, "the removed server's row to be deleted", func() bool { return f.row("gone") == nil })
	if f.row("s") == nil {
		t.Fatal("disabling deleted the row")
	}
}

func TestConfigFingerprintMismatchIsAConfigError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start(withConfig(func(c *tokensConfig) { c.ConfigWait = 200 * time.Millisecond }))
	_, err := bus.Request[bus.TokenReply](context.Background(), f.bus.NC, f.bus.Names.InternalToken(),
		bus.TokenRequest{Server: "s", ConfigFingerprint: strings.Repeat("0", 64)})
	if !errors.Is(err, &bus.Error{Code: bus.CodeConfigError}) {
		t.Fatalf("err = %v", err)
	}
	if f.ep.Counts().Calls != 0 {
		t.Fatal("a token was requested for a configuration the caller does not have")
	}
}

// TestLeaseIsRenewedWhileTheRequestRunsAndTheRequestIsAbandoned: a token
// request that outlives several lease periods keeps the lease (no second
// replica refreshes), and one that outlives AbandonAfter is given up
// without breaking the chain.
func TestLeaseIsRenewedWhileTheRequestRunsAndTheRequestIsAbandoned(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendPostgres, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	opt := withConfig(func(c *tokensConfig) { c.LeaseTTL = 600 * time.Millisecond; c.AbandonAfter = 4 * time.Second })
	f.start(opt)
	f.start(opt)
	f.mustToken("s")
	f.clock.Advance(time.Hour)

	gate := f.ep.Hold()
	results := make(chan error, 20)
	for range 20 {
		go func() { _, err := f.token("s", false); results <- err }()
	}
	testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived)
	row := f.row("s")
	holder, until := row.LeaseOwner, *row.LeaseExpiresAt
	renewals := 0
	testkit.Eventually(t, 10*time.Second, "the holder to renew its lease three times", func() bool {
		r := f.row("s")
		if r.LeaseOwner != holder {
			t.Fatalf("lease moved from %s to %s while the request ran", holder, r.LeaseOwner)
		}
		if r.LeaseExpiresAt.After(until) {
			renewals++
			until = *r.LeaseExpiresAt
		}
		return renewals >= 3
	})
	gate.Release()
	for range 20 {
		if err := testkit.Receive(t, 60*time.Second, "the waiting token requests to finish", results); err != nil {
			t.Fatal(err)
		}
	}
	if c := f.ep.Counts(); c.Refreshes != 2 || c.Calls != 2 {
		t.Fatalf("counts %+v, want one refresh although the request outlived the lease", c)
	}

	// Abandon: the endpoint never answers within AbandonAfter.
	f.clock.Advance(2 * time.Hour)
	gate = f.ep.Hold()
	_, err := f.token("s", false)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeOAuthFailed || !strings.Contains(be.Message, "did not answer in time") {
		t.Fatalf("abandoned request: %v", err)
	}
	f.ep.Unhold()
	gate.Release()
	if r := f.row("s"); r.LeaseOwner != "" {
		t.Fatalf("lease kept after abandoning: %+v", r)
	}
	f.mustToken("s")
	if c := f.ep.Counts(); c.Refreshes != 3 || c.InvalidGrants != 0 {
		t.Fatalf("counts %+v: abandoning broke the chain", c)
	}
}
