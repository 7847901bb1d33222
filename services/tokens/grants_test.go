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
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

func TestClientCredentialsFormFieldsAndNoStorage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{TokenField: "tok", TypeField: "kind", ExpiresField: "ttl", TokenType: "-", ExpiresIn: -1})
	f.publish(f.oauthServer("cc", config.GrantClientCredentials,
		`"scope": "mcp.read mcp.write", "audience": "aud-1", "extra_token_params": {"resource": "https://r", "grant_type": "password"},
		 "token_field": "tok", "token_type_field": "kind", "expires_in_field": "ttl", "default_token_type": "DPoP"`))
	f.start()

	var wg sync.WaitGroup
	replies := make(chan bus.TokenReply, 30)
	errs := make(chan error, 30)
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.token("cc", false)
			replies <- r
			errs <- err
		}()
	}
	wg.Wait()
	close(replies)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var first string
	for r := range replies {
		if first == "" {
			first = r.Value
		}
		if r.Value != first || !strings.HasPrefix(r.Value, "DPoP at-") || r.Header != "Authorization" || r.RefreshSkewSeconds != 60 {
			t.Fatalf("reply %+v", r)
		}
		// expires_in missing: 3600 s.
		if d := r.ExpiresAt.Sub(f.clock.Now()); d != time.Hour {
			t.Fatalf("expires in %s, want 1h", d)
		}
	}
	if c := f.ep.Counts(); c.Calls != 1 || c.ClientCredentials != 1 {
		t.Fatalf("endpoint counts %+v, want one call for 30 concurrent requests", c)
	}
	form := f.ep.Forms()[0]
	want := map[string]string{"grant_type": "client_credentials", "scope": "mcp.read mcp.write", "audience": "aud-1",
		"resource": "https://r", "client_id": f.ep.Options().ClientID, "client_secret": f.ep.Options().ClientSecret}
	for k, v := range want {
		if form.Get(k) != v {
			t.Errorf("form %s = %q, want %q", k, form.Get(k), v)
		}
	}
	if f.row("cc") != nil {
		t.Fatal("a client_credentials token was stored")
	}
}

func TestClientCredentialsNeedsIdAndSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendMemory, tokentest.Options{})
	f.publish(`"cc": {"type": "http", "url": "http://x/mcp", "oauth": {"token_url": "` + f.ep.URL + `", "client_id": "only-id"}}`)
	f.start()
	_, err := f.token("cc", false)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeConfigError || be.Message != "MCP server 'cc': OAuth client_credentials requires client_id and client_secret" {
		t.Fatalf("err = %v", err)
	}
	if f.ep.Counts().Calls != 0 {
		t.Fatal("the endpoint was called")
	}
}

func TestEndpointErrorsNeverEchoSecrets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start()
	o := f.ep.Options()
	f.ep.FailNext(400, `{"error": "invalid_request", "error_description": "bad client_secret `+o.ClientSecret+` for token `+o.RefreshToken+`"}`)
	_, err := f.token("s", false)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeOAuthFailed {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(be.Message, o.ClientSecret) || strings.Contains(be.Message, o.RefreshToken) || !strings.Contains(be.Message, "HTTP 400") {
		t.Fatalf("message = %q", be.Message)
	}
	// The failed request did not consume the seed: the next one works.
	if _, err := f.token("s", false); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryBackendKeepsTheChainInMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, backend string
		opts          []replicaOpt
	}{{"memory backend", backendMemory, nil}, {"no key", backendSQLite, []replicaOpt{noKey()}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.backend, tokentest.Options{})
			f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
			f.start(tc.opts...)
			a := f.mustToken("s")
			f.clock.Advance(2 * time.Hour)
			b := f.mustToken("s")
			f.clock.Advance(2 * time.Hour)
			c := f.mustToken("s")
			if a.Value == b.Value || b.Value == c.Value {
				t.Fatal("no refresh after expiry")
			}
			if got := f.ep.Counts(); got.Refreshes != 3 || got.InvalidGrants != 0 {
				t.Fatalf("counts %+v: the in-memory chain broke", got)
			}
			if tc.backend == backendSQLite && f.row("s") != nil {
				t.Fatal("tokens were stored without a key")
			}
		})
	}
}

func TestMultiInstanceWithoutKeyRefusesToStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	r := f.startNoWait(noKey(), withConfig(func(c *tokensConfig) { c.MultiInstance = true }))
	err := testkit.Receive(t, 60*time.Second, "Run to refuse to start", r.done)
	r.cancel = nil
	if err == nil || !strings.Contains(err.Error(), "MCPBUS_CREDENTIALS_KEY") || !strings.Contains(err.Error(), "'s'") || !strings.Contains(err.Error(), "multi_instance") {
		t.Fatalf("Run = %v", err)
	}
	// With a key it starts; with a client_credentials server only it starts too.
	f.start(withConfig(func(c *tokensConfig) { c.MultiInstance = true }))
	_ = context.Background()
}

func TestAnAccessTokenThatCannotBeAHeaderIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendMemory, tokentest.Options{})
	f.publish(f.oauthServer("cc", config.GrantClientCredentials, ""))
	f.start()
	f.ep.FailNext(200, `{"access_token": "abc\r\nX-Injected: 1", "token_type": "Bearer"}`)
	_, err := f.token("cc", false)
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeOAuthFailed || !strings.Contains(be.Message, "line break") || strings.Contains(be.Message, "abc") {
		t.Fatalf("err = %v", err)
	}
	f.ep.FailNext(200, `{"token_type": "Bearer"}`)
	if _, err := f.token("cc", false); !errors.As(err, &be) || be.Message != "MCP server 'cc': OAuth token response missing 'access_token'" {
		t.Fatalf("missing token: %v", err)
	}
	if r, err := f.token("cc", false); err != nil || !strings.HasPrefix(r.Value, "Bearer at-") {
		t.Fatalf("%v %v", r, err)
	}
}

// TestClientSecretBasic: an oauth block whose token_endpoint_auth_method
// is client_secret_basic (as a connected account's authorization server
// may ask) sends the client's id and secret as a Basic header on a refresh
// and a client_credentials grant, and never in the form; the endpoint
// refuses a secret in the form.
func TestClientSecretBasic(t *testing.T) {
	t.Parallel()
	for _, grant := range []string{config.GrantRefreshToken, config.GrantClientCredentials} {
		t.Run(grant, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, backendSQLite, tokentest.Options{BasicAuth: true, ClientID: "id with:colon"})
			f.publish(f.oauthServer("s", grant, `"token_endpoint_auth_method": "client_secret_basic"`))
			f.start()
			if _, err := f.token("s", false); err != nil {
				t.Fatal(err)
			}
			form := f.ep.Forms()[0]
			if form.Has("client_secret") || form.Has("client_id") {
				t.Fatalf("client credentials in the form: %v", form)
			}
		})
	}
}
