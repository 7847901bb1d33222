package tokens_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/services/tokens"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

// servePersonal answers mcpbus.internal.personal on the real bus as the
// api service does: each user's connections.
func (f *fixture) servePersonal(conns map[string][]bus.PersonalServer) {
	f.t.Helper()
	nc := f.bus.Connect(f.t)
	_, err := nc.Subscribe(f.bus.Names.InternalPersonal(), func(m *nats.Msg) {
		var req bus.PersonalServersRequest
		_ = json.Unmarshal(m.Data, &req)
		b, _ := json.Marshal(bus.PersonalServersReply{UserID: req.UserID, Servers: conns[req.UserID]})
		_ = m.Respond(b)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	// The server must have the subscription before the service asks.
	if err := nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
}

func TestPersonalConnectionHasItsOwnOwnerScopedChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	o := f.ep.Options()
	def := json.RawMessage(fmt.Sprintf(`{"type": "http", "url": "http://x/mcp", "oauth": {"token_url": %q, "grant_type": "refresh_token",
		"client_id": %q, "client_secret": %q, "refresh_token": %q}}`, f.ep.URL, o.ClientID, o.ClientSecret, o.RefreshToken))
	runtime, err := bus.PersonalRuntimeName("alice", "mine", def)
	if err != nil {
		t.Fatal(err)
	}
	f.servePersonal(map[string][]bus.PersonalServer{"alice": {{Name: "mine", RuntimeName: runtime, Definition: def}}})
	f.publish()
	a := f.start(loopbackEgress)
	ask := func(owner string) (bus.TokenReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return bus.Request[bus.TokenReply](ctx, f.bus.NC, f.bus.Names.InternalToken(), bus.TokenRequest{Server: runtime, Owner: owner})
	}
	first, err := ask("alice")
	if err != nil {
		t.Fatal(err)
	}
	row := f.row(runtime)
	if row == nil || row.OwnerUserID != "alice" || f.storedRefreshToken(runtime) != f.ep.CurrentRefreshToken() {
		t.Fatalf("row %+v", row)
	}
	if _, err := ask("bob"); !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("another user's request: %v, want not_found", err)
	}
	a.stop(t)
	f.start(loopbackEgress)
	if again, err := ask("alice"); err != nil || again.Value != first.Value {
		t.Fatalf("after restart: %v", err)
	}
	f.clock.Advance(2 * time.Hour)
	if _, err := ask("alice"); err != nil {
		t.Fatal(err)
	}
	if c := f.ep.Counts(); c.Refreshes != 2 || c.InvalidGrants != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// loopbackEgress lets personal connections' token_url reach the test's
// endpoint on 127.0.0.1, which the egress policy refuses by default.
var loopbackEgress = withConfig(func(c *tokens.Config) { c.EgressAllow = []string{"127.0.0.1"} })

// The SSRF attack through OAuth: a personal connection whose token_url is
// a loopback service (directly, or through a name resolving to it) is
// refused by the egress policy, and the service never gets the request.
func TestPersonalTokenURLToLoopbackRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, backendSQLite, tokentest.Options{})
	o := f.ep.Options()
	var conns []bus.PersonalServer
	for _, u := range []string{f.ep.URL, strings.Replace(f.ep.URL, "127.0.0.1", "localhost", 1), "file:///etc/passwd"} {
		def := json.RawMessage(fmt.Sprintf(`{"type": "http", "url": "http://x/mcp", "oauth": {"token_url": %q, "grant_type": "refresh_token",
			"client_id": %q, "client_secret": %q, "refresh_token": %q}}`, u, o.ClientID, o.ClientSecret, o.RefreshToken))
		rt, err := bus.PersonalRuntimeName("mallory", u, def)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, bus.PersonalServer{Name: u, RuntimeName: rt, Definition: def})
	}
	f.servePersonal(map[string][]bus.PersonalServer{"mallory": conns})
	f.publish()
	f.start()
	for _, c := range conns {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := bus.Request[bus.TokenReply](ctx, f.bus.NC, f.bus.Names.InternalToken(), bus.TokenRequest{Server: c.RuntimeName, Owner: "mallory"})
		cancel()
		want := "refused by the egress policy"
		if strings.HasPrefix(c.Name, "file:") { // an invalid definition under the config rules: never loaded
			want = "is not configured"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("token_url %s: %v, want %q", c.Name, err, want)
		}
	}
	if n := f.ep.Counts().Calls; n != 0 {
		t.Fatalf("the loopback token endpoint got %d request(s)", n)
	}
}
