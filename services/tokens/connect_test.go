package tokens_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/services/tokens"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

func withPublicURL(c *tokens.Config) { c.PublicURL = "http://127.0.0.1:8001" }

func (f *fixture) authorize(req bus.OAuthAuthorizeRequest) (bus.OAuthAuthorizeReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Request[bus.OAuthAuthorizeReply](ctx, f.bus.NC, f.bus.Names.InternalOAuthAuthorize(), req)
}

// TestPersonalConnectionCannotReachInternalAuthorizationServers: a user's
// personal connection whose URL is an internal address gets no request
// from mcpbus, neither discovery nor anything else: the egress policy
// refuses it before connecting.
func TestPersonalConnectionCannotReachInternalAuthorizationServers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	var hits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://169.254.169.254/latest"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer internal.Close()
	def := json.RawMessage(`{"type": "http", "url": "` + internal.URL + `/mcp", "oauth": {"grant_type": "authorization_code"}}`)
	runtime, err := bus.PersonalRuntimeName("alice", "mine", def)
	if err != nil {
		t.Fatal(err)
	}
	f.servePersonal(map[string][]bus.PersonalServer{"alice": {{Name: "mine", RuntimeName: runtime, Definition: def}}})
	f.publish()
	f.start(withConfig(withPublicURL))
	_, err = f.authorize(bus.OAuthAuthorizeRequest{Server: runtime, Owner: "alice", UserID: "alice"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeOAuthFailed || !strings.Contains(be.Message, "egress") {
		t.Fatalf("authorize: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal server got %d requests", n)
	}
	// Another user cannot start a flow on Alice's connection.
	if _, err := f.authorize(bus.OAuthAuthorizeRequest{Server: runtime, Owner: "alice", UserID: "bob"}); !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("bob on alice's connection: %v", err)
	}
}

// TestConnectingNeedsPublicURLAndAdminForShared: without api.public_url a
// flow is refused naming the setting; a shared server is connected by an
// admin only; a server of another grant does not connect accounts.
func TestConnectingNeedsPublicURLAndAdminForShared(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(`"team": {"type": "http", "url": "http://127.0.0.1:1/mcp", "oauth": {"grant_type": "authorization_code", "connect": "shared"}}`,
		f.oauthServer("cc", "client_credentials", ""))
	f.start()
	_, err := f.authorize(bus.OAuthAuthorizeRequest{Server: "team", UserID: "admin", Admin: true})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeConfigError || !strings.Contains(be.Message, "api.public_url") {
		t.Fatalf("without public_url: %v", err)
	}
	_, err = f.authorize(bus.OAuthAuthorizeRequest{Server: "team", UserID: "alice"})
	if !errors.As(err, &be) || be.Code != bus.CodeForbidden {
		t.Fatalf("a user on a shared server: %v", err)
	}
	_, err = f.authorize(bus.OAuthAuthorizeRequest{Server: "cc", UserID: "alice"})
	if !errors.As(err, &be) || be.Code != bus.CodeInvalidRequest {
		t.Fatalf("a client_credentials server: %v", err)
	}
	// A forged state is refused and names no secret.
	_, err = bus.Request[bus.OAuthCallbackReply](context.Background(), f.bus.NC, f.bus.Names.InternalOAuthCallback(), bus.OAuthCallbackRequest{State: "forged", Code: "c0de"})
	if !errors.As(err, &be) || be.Code != bus.CodeInvalidRequest || strings.Contains(be.Message, "c0de") {
		t.Fatalf("forged state: %v", err)
	}
}

// TestStepUpOfASharedServerStartsNoFlowForAUser: an upstream's 403
// insufficient_scope on a shared connection, relayed for a plain user's
// call, does not let that user start a flow for everyone's account: the
// answer is auth_required telling that an admin connects it again, with
// no link, and nothing is asked of the server or its authorization
// server.
func TestStepUpOfASharedServerStartsNoFlowForAUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	var hits atomic.Int64
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer upstream.Close()
	f.publish(`"team": {"type": "http", "url": "` + upstream.URL + `/mcp", "oauth": {"grant_type": "authorization_code", "connect": "shared"}}`)
	f.start(withConfig(withPublicURL))
	_, err := f.authorize(bus.OAuthAuthorizeRequest{Server: "team", UserID: "alice", StepUp: true, StepUpScope: `files:write "injected`})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeAuthRequired || be.Details["authorize_url"] != nil || !strings.Contains(be.Message, "an admin connects it again") {
		t.Fatalf("a user's step-up on a shared server: %v", err)
	}
	if strings.Contains(be.Message, `"injected`) || !strings.Contains(be.Message, "files:write") {
		t.Fatalf("the challenge's scope is not filtered: %q", be.Message)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server got %d requests", n)
	}
}
