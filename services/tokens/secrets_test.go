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
	"github.com/mcpbus/mcpbus/pkg/tokenclient"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

// TestNoSecretInLogsRowsOrErrors drives every path that touches a secret
// (grants, rotation, restart, a key mismatch, store failure, endpoint
// errors that echo the request, invalid_grant) and then searches the logs,
// every raw column of the token table, every error and every reply for the
// client secret, the seed and every token the endpoint issued.
func TestNoSecretInLogsRowsOrErrors(t *testing.T) {
	t.Parallel()
	for _, backend := range sqlBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, backend, tokentest.Options{})
			o := f.ep.Options()
			f.publish(f.oauthServer("s", config.GrantRefreshToken, `"scope": "a b"`), f.oauthServer("cc", config.GrantClientCredentials, ""))
			a := f.start()
			var errs []error
			var replies []bus.TokenReply
			ask := func(server string, force bool) {
				r, err := f.token(server, force)
				if err != nil {
					errs = append(errs, err)
				} else {
					replies = append(replies, r)
				}
			}
			ask("s", false)
			ask("cc", false)
			ask("s", true)
			f.clock.Advance(2 * time.Hour)
			ask("s", false)
			// The database refuses writes before the claim: the refresh is refused.
			f.clock.Advance(2 * time.Hour)
			f.failWrites(true)
			ask("s", false)
			f.failWrites(false)
			// The database refuses writes after the token request: kept in memory, stored later.
			gate := f.ep.Hold()
			got := make(chan struct{})
			go func() { ask("s", false); close(got) }()
			testkit.Receive(t, 30*time.Second, "the refresh to reach the token endpoint", gate.Arrived)
			f.failWrites(true)
			f.ep.Unhold()
			gate.Release()
			testkit.Receive(t, 60*time.Second, "the token request to return", got)
			f.failWrites(false)
			testkit.Eventually(t, 10*time.Second, "the retry to store", func() bool {
				return f.storedRefreshToken("s") == f.ep.CurrentRefreshToken()
			})
			// An endpoint error that echoes the request's secrets.
			f.clock.Advance(2 * time.Hour)
			f.ep.FailNext(400, `{"error":"invalid_request","error_description":"client_secret=`+o.ClientSecret+`&refresh_token=`+f.ep.CurrentRefreshToken()+`"}`)
			ask("s", false)
			f.ep.FailNext(500, `upstream said `+o.ClientSecret)
			ask("cc", true)
			a.stop(t)
			// A replica with another key falls back to the spent seed: invalid_grant.
			other, _ := crypto.NewKey()
			f.start(withKey(other))
			ask("s", false)
			if len(errs) != 4 || len(replies) != 5 {
				t.Fatalf("%d errors, %d replies: %v", len(errs), len(replies), errs)
			}

			secrets := f.ep.Secrets()
			if len(secrets) < 8 {
				t.Fatalf("only %d secrets seen", len(secrets))
			}
			logs, rows := f.logs.String(), f.rawRows()
			if !strings.Contains(logs, "refreshed an OAuth access token") || !strings.Contains(rows, "s|") && !strings.Contains(rows, "s") {
				t.Fatalf("nothing logged or stored:\n%s\n%s", logs, rows)
			}
			var errText strings.Builder
			for _, err := range errs {
				errText.WriteString(err.Error() + "\n")
				var be *bus.Error
				if errors.As(err, &be) {
					errText.WriteString(be.Message + "\n")
				}
			}
			issuedAccess := map[string]bool{}
			for _, r := range replies {
				issuedAccess[strings.TrimPrefix(r.Value, "Bearer ")] = true
			}
			for _, sec := range secrets {
				for what, text := range map[string]string{"logs": logs, "token table": rows, "errors": errText.String()} {
					if strings.Contains(text, sec) {
						t.Errorf("%s contain the secret %q", what, sec)
					}
				}
				if issuedAccess[sec] {
					continue // the access token is what a reply is for
				}
				for _, r := range replies {
					if strings.Contains(r.Value, sec) || strings.Contains(r.Header, sec) {
						t.Errorf("a reply contains the secret %q", sec)
					}
				}
			}
		})
	}
}

func TestSecretsFromEnvironmentVariables(t *testing.T) {
	f := newFixture(t, backendSQLite, tokentest.Options{})
	o := f.ep.Options()
	t.Setenv("TOKENS_TEST_CLIENT_SECRET", o.ClientSecret)
	t.Setenv("TOKENS_TEST_REFRESH_TOKEN", o.RefreshToken)
	f.publish(`"s": {"type": "http", "url": "http://x/mcp", "oauth": {"token_url": "` + f.ep.URL + `", "grant_type": "refresh_token",
		"client_id": "` + o.ClientID + `", "client_secret": "$TOKENS_TEST_CLIENT_SECRET", "refresh_token": "$TOKENS_TEST_REFRESH_TOKEN"}}`)
	f.start()
	f.mustToken("s")
	if c := f.ep.Counts(); c.Refreshes != 1 {
		t.Fatalf("counts %+v", c)
	}
	if form := f.ep.Forms()[0]; form.Get("client_secret") != o.ClientSecret || form.Get("refresh_token") != o.RefreshToken {
		t.Fatal("the $VAR values were not expanded")
	}
}

// TestMergeHeadersThroughTheTokensService is the path discovery and
// toolcall take: tokenclient.MergeHeaders against a running tokens service.
func TestMergeHeadersThroughTheTokensService(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	ext := f.publish(f.oauthServer("s", config.GrantRefreshToken, `"refresh_skew_seconds": -5`), `"plain": {"type": "http", "url": "http://x/mcp"}`)
	f.start()
	c := tokenclient.New(f.bus.Connect(t), f.bus.Names, tokenclient.WithClock(f.clock.Now))
	ctx := context.Background()
	static := map[string]string{"authorization": "Bearer static", "X-Api": "1"}
	var wg sync.WaitGroup
	results := make(chan map[string]string, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.MergeHeaders(ctx, ext.Server("s"), "", static)
			if err != nil {
				t.Error(err)
			}
			results <- h
		}()
	}
	wg.Wait()
	close(results)
	for h := range results {
		if len(h) != 2 || !strings.HasPrefix(h["authorization"], "Bearer at-") || h["X-Api"] != "1" {
			t.Fatalf("merged headers %v", h)
		}
	}
	if f.ep.Counts().Calls != 1 {
		t.Fatalf("counts %+v", f.ep.Counts())
	}
	// Negative skew counts as 0: cached until the expiry itself.
	f.clock.Advance(time.Hour - time.Second)
	h, _ := c.MergeHeaders(ctx, ext.Server("s"), "", nil)
	f.clock.Advance(2 * time.Second)
	h2, err := c.MergeHeaders(ctx, ext.Server("s"), "", nil)
	if err != nil || h["Authorization"] == h2["Authorization"] || f.ep.Counts().Refreshes != 2 {
		t.Fatalf("after expiry: %v, counts %+v", err, f.ep.Counts())
	}
	if h, err := c.MergeHeaders(ctx, ext.Server("plain"), "", static); err != nil || h["authorization"] != "Bearer static" {
		t.Fatalf("plain server: %v %v", h, err)
	}
}

// TestRefreshAfterUpstreamRefusalRefreshesOnce: many callers refused with
// the same header value cause one refresh, through two replicas.
func TestRefreshAfterUpstreamRefusalRefreshesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendPostgres, tokentest.Options{})
	ext := f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start()
	f.start()
	srv := ext.Server("s")
	ctx := context.Background()
	clients := []*tokenclient.Client{tokenclient.New(f.bus.Connect(t), f.bus.Names), tokenclient.New(f.bus.Connect(t), f.bus.Names)}
	h, err := clients[0].MergeHeaders(ctx, srv, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := h["Authorization"]
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := clients[i%2].Refresh(ctx, srv, "", refused); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, c := range clients {
		h, err := c.MergeHeaders(ctx, srv, "", nil)
		if err != nil || h["Authorization"] == refused {
			t.Fatalf("after refresh: %v %v", h, err)
		}
	}
	if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 {
		t.Fatalf("counts %+v, want one refresh for 20 refusals of one value", c)
	}
}
