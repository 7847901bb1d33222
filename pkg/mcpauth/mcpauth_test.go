package mcpauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpauth"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func TestParseChallenge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   []string
		want mcpauth.Challenge
		ok   bool
	}{
		{[]string{`Bearer resource_metadata="https://a.example/.well-known/oauth-protected-resource/mcp", scope="r w"`},
			mcpauth.Challenge{ResourceMetadata: "https://a.example/.well-known/oauth-protected-resource/mcp", Scope: "r w"}, true},
		{[]string{`Basic realm="x"`, `bearer error="insufficient_scope", scope="admin"`}, mcpauth.Challenge{Scope: "admin", Error: "insufficient_scope"}, true},
		{[]string{`Basic realm="x", Bearer error=invalid_token`}, mcpauth.Challenge{Error: "invalid_token"}, true},
		{[]string{`Basic realm="bearer"`}, mcpauth.Challenge{}, false},
	}
	for _, c := range cases {
		got, ok := mcpauth.ParseChallenge(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseChallenge(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestResourceCovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		res, srv string
		want     bool
	}{
		{"https://a.example/mcp", "https://a.example/mcp", true},
		{"https://a.example/", "https://a.example/mcp", true},
		{"https://a.example/mc", "https://a.example/mcp", false},
		{"https://evil.example/mcp", "https://a.example/mcp", false},
		{"http://a.example/mcp", "https://a.example/mcp", false},
	} {
		if got := mcpauth.ResourceCovers(c.res, c.srv); got != c.want {
			t.Errorf("ResourceCovers(%q, %q) = %v", c.res, c.srv, got)
		}
	}
}

// protectedResource is an MCP endpoint that asks for a token, with its
// metadata at the path-aware well-known URL only (header=false) or named in
// the challenge (header=true).
func protectedResource(t *testing.T, issuer string, header bool) string {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(mcpauth.ResourceMetadata{Resource: srv.URL + "/mcp", AuthorizationServers: []string{issuer}, ScopesSupported: []string{"mcp:read"}})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) {
		if header {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		}
		w.WriteHeader(http.StatusUnauthorized)
	})
	return srv.URL + "/mcp"
}

// TestAgainstOIDCProvider runs the whole client side against oidc-provider:
// discovery from a 401 (header and well-known), registration, the
// authorization code with PKCE and resource, the issuer check, the
// exchange, a rotating refresh, revocation; and refusals: a code with
// another flow's verifier, a replayed code, a spent refresh token.
func TestAgainstOIDCProvider(t *testing.T) {
	issuer := testkit.ServeOIDCProvider(t, 60)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	d := &mcpauth.Discoverer{HTTP: hc}

	for _, header := range []bool{true, false} {
		mcpURL := protectedResource(t, issuer, header)
		ch, err := d.Challenge(ctx, mcpURL)
		if err != nil {
			t.Fatal(err)
		}
		if header != (ch.ResourceMetadata != "") {
			t.Fatalf("challenge %+v", ch)
		}
		rm, err := d.Resource(ctx, mcpURL, ch)
		if err != nil {
			t.Fatalf("header=%v: %v", header, err)
		}
		if rm.Resource != mcpURL || rm.AuthorizationServers[0] != issuer || mcpauth.SelectScope(ch, rm) != "mcp:read" {
			t.Fatalf("resource metadata %+v", rm)
		}
	}
	mcpURL := protectedResource(t, issuer, true)
	md, err := d.AuthServer(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AuthServer(ctx, issuer+"/other"); err == nil {
		t.Fatal("metadata of another issuer was accepted")
	}
	const redirect = "http://127.0.0.1:1/oauth/callback"
	client, err := mcpauth.Register(ctx, hc, md, "mcpbus test", redirect, "mcp:read mcp:write")
	if err != nil {
		t.Fatal(err)
	}
	if client.ID == "" || client.AuthMethod != mcpauth.AuthNone {
		t.Fatalf("registered client %+v", client)
	}

	authorize := func(login, state, verifier string) url.Values {
		u, err := mcpauth.AuthorizeURL(md, mcpauth.AuthRequest{Client: *client, RedirectURI: redirect, State: state, Verifier: verifier, Scope: "mcp:read mcp:write", Resource: mcpURL})
		if err != nil {
			t.Fatal(err)
		}
		back, err := url.Parse(testkit.OIDCLogin(t, u, login))
		if err != nil {
			t.Fatal(err)
		}
		q := back.Query()
		if q.Get("state") != state || q.Get("code") == "" {
			t.Fatalf("redirect back %s", back.Redacted())
		}
		if err := mcpauth.CheckIssuer(md, q.Get("iss")); err != nil {
			t.Fatal(err)
		}
		if mcpauth.CheckIssuer(md, "http://evil.example") == nil {
			t.Fatal("a foreign iss passed")
		}
		return q
	}
	v1, v2 := mcpauth.NewVerifier(), mcpauth.NewVerifier()
	q1 := authorize("alice", "s1", v1)
	q2 := authorize("bob", "s2", v2)

	// Bob's code with Alice's verifier (a state from another flow): refused.
	_, err = mcpauth.Exchange(ctx, hc, md, *client, q2.Get("code"), v1, redirect, mcpURL)
	var te *mcpauth.TokenError
	if !errors.As(err, &te) || te.Code != "invalid_grant" {
		t.Fatalf("another flow's verifier: %v", err)
	}
	tok, err := mcpauth.Exchange(ctx, hc, md, *client, q1.Get("code"), v1, redirect, mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	if tok.RefreshToken == "" || tok.ExpiresIn <= 0 || tok.ExpiresIn > 60 || strings.Count(tok.AccessToken, ".") != 2 {
		t.Fatalf("token: refresh %v, expires_in %d, jwt %v", tok.RefreshToken != "", tok.ExpiresIn, strings.Count(tok.AccessToken, ".") == 2)
	}
	next, err := mcpauth.Refresh(ctx, hc, md.TokenEndpoint, *client, tok.RefreshToken, mcpURL)
	if err != nil {
		t.Fatal(err)
	}
	if next.RefreshToken == "" || next.RefreshToken == tok.RefreshToken {
		t.Fatal("the refresh token did not rotate")
	}
	_, err = mcpauth.Refresh(ctx, hc, md.TokenEndpoint, *client, tok.RefreshToken, mcpURL)
	if !errors.As(err, &te) || te.Code != "invalid_grant" {
		t.Fatalf("spent refresh token: %v", err)
	}
	if strings.Contains(err.Error(), tok.RefreshToken) {
		t.Fatal("the error quotes the refresh token")
	}
	// A replayed code is refused (and the server revokes what it issued).
	if _, err := mcpauth.Exchange(ctx, hc, md, *client, q1.Get("code"), v1, redirect, mcpURL); !errors.As(err, &te) || te.Code != "invalid_grant" {
		t.Fatalf("replayed code: %v", err)
	}
	if _, err := mcpauth.Refresh(ctx, hc, md.TokenEndpoint, *client, next.RefreshToken, mcpURL); !errors.As(err, &te) || te.Code != "invalid_grant" {
		t.Fatalf("refresh after a replayed code: %v", err)
	}
}

// TestChallengeAfterOpenInitialize: a server that lets initialize through
// (opening a session) and guards tools/list is still discovered: the
// challenge, with its scope, comes from the tools/list it refuses, asked
// in that session. Without the second probe Challenge answers
// ErrNoChallenge and no flow can start.
func TestChallengeAfterOpenInitialize(t *testing.T) {
	var sawSession bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		if msg.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "sess-1")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
			return
		}
		sawSession = r.Header.Get("Mcp-Session-Id") == "sess-1"
		w.Header().Set("WWW-Authenticate", `Bearer scope="mcp:basic", resource_metadata="http://`+r.Host+`/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := (&mcpauth.Discoverer{HTTP: srv.Client()}).Challenge(ctx, srv.URL+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if ch.Scope != "mcp:basic" || ch.ResourceMetadata != srv.URL+"/prm" || !sawSession {
		t.Fatalf("challenge %+v, tools/list in the session: %v", ch, sawSession)
	}
}

// TestRegisterDeclaresWebApplication: the registration says mcpbus is a
// web application (application_type "web"), which MCP requires of a
// dynamic registration since 2026-07-28.
func TestRegisterDeclaresWebApplication(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"client_id":"c1"}`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md := &mcpauth.ServerMetadata{Issuer: srv.URL, RegistrationEndpoint: srv.URL + "/register"}
	if _, err := mcpauth.Register(ctx, srv.Client(), md, "mcpbus", "https://mcpbus.example/oauth/callback", ""); err != nil {
		t.Fatal(err)
	}
	if got["application_type"] != "web" {
		t.Fatalf("registration %v: application_type %v, want web", got, got["application_type"])
	}
}

// TestUniteScopes: the union keeps the first order, drops repeats and
// anything that is not a scope token (an upstream's challenge cannot put
// quotes, backslashes or control characters into a request or a message).
func TestUniteScopes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"mcp:read", "mcp:read mcp:write"}, "mcp:read mcp:write"},
		{[]string{"", "  a  b "}, "a b"},
		{[]string{"a", `b"c d\e f` + "\x01g h\u00e9"}, "a"},
		{nil, ""},
	} {
		if got := mcpauth.UniteScopes(tc.in...); got != tc.want {
			t.Errorf("UniteScopes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
