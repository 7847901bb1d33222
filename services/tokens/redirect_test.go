package tokens_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

// A token_url that answers 307 to another endpoint does not get the
// client secret replayed there: the token endpoints' client follows no
// redirect, so the real endpoint behind the redirect never sees a request
// and the token request fails without quoting the secret.
func TestTokenEndpointRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	redirector := httptest.NewServer(http.RedirectHandler(f.ep.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)
	entry := strings.Replace(f.oauthServer("moved", config.GrantClientCredentials, ""), f.ep.URL, redirector.URL+"/token", 1)
	f.publish(entry)
	f.start()
	_, err := f.token("moved", false)
	if err == nil {
		t.Fatal("a token was obtained through a redirect")
	}
	if secret := f.ep.Options().ClientSecret; strings.Contains(err.Error(), secret) {
		t.Fatalf("the error quotes the client secret: %v", err)
	}
	if n := f.ep.Counts().Calls; n != 0 {
		t.Fatalf("the endpoint behind the redirect got %d request(s)", n)
	}
}
