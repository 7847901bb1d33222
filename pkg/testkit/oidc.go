package testkit

import (
	"embed"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// OIDCProviderVersion pins oidc-provider, the authorization server that
// nobody here wrote, for the connect-your-account tests.
const OIDCProviderVersion = "9.13.3"

//go:embed node/oidc-provider.mjs
var nodeScripts embed.FS

// ServeOIDCProvider runs oidc-provider (installed with npm like
// server-everything) on a free loopback port until the test ends, with
// PKCE required, dynamic registration, resource indicators (JWT access
// tokens that live accessTokenTTL seconds), refresh-token rotation and
// revocation, and returns its issuer (http://127.0.0.1:<port>). See
// node/oidc-provider.mjs for its test routes (/test/stats,
// /test/kill-refresh).
func ServeOIDCProvider(t testing.TB, accessTokenTTL int) string {
	t.Helper()
	pkgDir, err := installNPM("oidc-provider", OIDCProviderVersion, "for the authorization-server tests")
	if err != nil {
		t.Fatalf("oidc-provider is not available: %v", err)
	}
	script, err := nodeScripts.ReadFile("node/oidc-provider.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// Next to node_modules, so its import resolves.
	path := filepath.Join(filepath.Dir(filepath.Dir(pkgDir)), fmt.Sprintf("mcpbus-oidc-provider-%d.mjs", os.Getpid()))
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return serveNode(t, "oidc-provider", port, []string{path}, "PORT="+strconv.Itoa(port), "AT_TTL="+strconv.Itoa(accessTokenTTL))
}

// OIDCLogin plays the person in front of oidc-provider's development
// interactions: it opens authorizeURL, signs in as login, consents, and
// returns the URL the authorization server finally redirects to (the
// client's redirect URI with code, state and iss), without opening it.
func OIDCLogin(t testing.TB, authorizeURL, login string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var final string
	hc := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), issuerOf(via[0].URL)) {
			final = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := hc.Get(authorizeURL)
	for step := 0; final == "" && step < 4; step++ {
		if err != nil {
			t.Fatalf("oidc-provider interaction: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		m := formAction.FindSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("oidc-provider interaction: HTTP %d without a form: %s", resp.StatusCode, body)
		}
		action := html.UnescapeString(string(m[1]))
		if !strings.HasPrefix(action, "http") {
			action = issuerOf(resp.Request.URL) + action
		}
		form := url.Values{"prompt": {"consent"}}
		if strings.Contains(string(body), `name="login"`) {
			form = url.Values{"prompt": {"login"}, "login": {login}, "password": {"any"}}
		}
		resp, err = hc.PostForm(action, form)
	}
	if err != nil || final == "" {
		t.Fatalf("oidc-provider interaction did not redirect back to the client: %v", err)
	}
	_ = resp.Body.Close()
	return final
}

var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

func issuerOf(u *url.URL) string { return u.Scheme + "://" + u.Host }
