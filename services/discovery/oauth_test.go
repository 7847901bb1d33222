package discovery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/pkg/tokenclient"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// countingTokens is the real token client, counting the asks discovery
// makes.
type countingTokens struct {
	*tokenclient.Client
	asks atomic.Int32
}

func (c *countingTokens) Header(ctx context.Context, req bus.TokenRequest) (string, string, time.Time, error) {
	c.asks.Add(1)
	return c.Client.Header(ctx, req)
}

// TestOAuthDiscoveryWaitsForALateTokensService: discovery starts before
// the tokens service (mcpbus dev, or serve mode with tokens not up yet).
// Its discoveries of OAuth servers wait for tokens instead of going on
// without the header: the protected upstream, which refuses calls without
// the bearer, ends up cached with the token, and the permissive one is
// never reached (let alone cached) without it.
func TestOAuthDiscoveryWaitsForALateTokensService(t *testing.T) {
	t.Parallel()
	const token = "Bearer late-token"
	protected := newFakeAuth(t, "Authorization", token, tools("s", 1)...)
	permissive := newFake(t, tools("p", 1)...)
	b := testkit.StartBus(t)
	oauth := `"session_init_timeout": 30, "oauth": {"enabled": true, "token_url": "http://127.0.0.1:1/token", "client_id": "id", "client_secret": "secret"}`
	b.PublishExtensions(t, cfgOf(srvJSON{"secure", httpServer(protected.URL, oauth)}, srvJSON{"open", httpServer(permissive.URL, oauth)}))
	tokens := &countingTokens{Client: tokenclient.New(b.Connect(t))}
	runServiceDeps(t, b, discovery.Config{}, discovery.Deps{Tokens: tokens}) // warms up at start

	// Both discoveries asked for their token and found no tokens service.
	testkit.Eventually(t, 20*time.Second, "both discoveries to ask for a token", func() bool { return tokens.asks.Load() >= 2 })
	serveTokens(t, b, token)

	r := listUntil(t, b, "both OAuth servers discovered", func(r bus.ToolsListReply) bool {
		return hasTool(r, "secure_s0") && hasTool(r, "open_p0") && len(r.FailedServers) == 0
	})
	if r.Generation != 0 {
		t.Errorf("generation %d, want 0 (no reset)", r.Generation)
	}
	for name, f := range map[string]*fake{"secure": protected, "open": permissive} {
		sent := f.sentHeaders()
		if len(sent) == 0 {
			t.Errorf("%s: no requests", name)
		}
		for _, h := range sent {
			if got := h.Get("Authorization"); got != token {
				t.Errorf("%s was called with Authorization %q: discovery went on without the token", name, got)
			}
		}
	}
}
