package tokens_test

import (
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/services/tokens"
	"github.com/mcpbus/mcpbus/services/tokens/tokentest"
)

func withMetrics(m *metrics.Tokens) replicaOpt {
	return func(_ *tokens.Config, d *tokens.Deps) { d.Metrics = m }
}

// A token request moves fetches; one that reaches the token endpoint moves
// refreshes, a cached answer does not; an endpoint's invalid_grant moves
// refreshes{invalid_grant} and invalid_grant_total, and the failed request
// counts under its error code.
func TestTokenMetricsMove(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	m := metrics.NewTokens(reg)
	f := newFixture(t, backendSQLite, tokentest.Options{})
	f.publish(f.oauthServer("s", config.GrantRefreshToken, ""))
	f.start(withMetrics(m))
	val := func(name string, labels map[string]string) float64 { return metricstest.Value(t, reg, name, labels) }
	rt := config.GrantRefreshToken

	f.mustToken("s")
	f.mustToken("s") // cached: no second refresh
	if n := val("mcpbus_tokens_fetches_total", map[string]string{"server": "s", "grant": rt, "outcome": "ok"}); n != 2 {
		t.Errorf("fetches{s, ok} = %v, want 2", n)
	}
	if n := val("mcpbus_tokens_refreshes_total", map[string]string{"server": "s", "grant": rt, "outcome": "ok"}); n != 1 {
		t.Errorf("refreshes{s, ok} = %v, want 1", n)
	}
	f.clock.Advance(2 * time.Hour) // expired: the next request refreshes
	f.mustToken("s")
	if n := val("mcpbus_tokens_refreshes_total", map[string]string{"server": "s", "grant": rt, "outcome": "ok"}); n != 2 {
		t.Errorf("refreshes{s, ok} after expiry = %v, want 2", n)
	}

	f.ep.SetRefreshToken("revoked-" + randHex(4)) // the stored chain is now refused
	f.clock.Advance(2 * time.Hour)
	if _, err := f.token("s", false); err == nil {
		t.Fatal("a revoked chain gave a token")
	}
	if n := val("mcpbus_tokens_refreshes_total", map[string]string{"server": "s", "grant": rt, "outcome": "invalid_grant"}); n != 1 {
		t.Errorf("refreshes{s, invalid_grant} = %v, want 1", n)
	}
	if n := val("mcpbus_tokens_invalid_grant_total", map[string]string{"server": "s"}); n != 1 {
		t.Errorf("invalid_grant{s} = %v, want 1", n)
	}
	if n := val("mcpbus_tokens_fetches_total", map[string]string{"server": "s", "grant": rt, "outcome": "oauth_failed"}); n != 1 {
		t.Errorf("fetches{s, oauth_failed} = %v, want 1", n)
	}
	// A request for a server nobody configured never becomes a label.
	if _, err := f.token("no-such-server-x1", false); err == nil {
		t.Fatal("an unknown server gave a token")
	}
	if n := metricstest.Sum(t, reg, "mcpbus_tokens_fetches_total", map[string]string{"server": "no-such-server-x1"}); n != 0 {
		t.Errorf("the unknown server became a label: %v", n)
	}
	if n := metricstest.Sum(t, reg, "mcpbus_tokens_fetches_total", map[string]string{"server": "unknown"}); n != 1 {
		t.Errorf("fetches{unknown} = %v, want 1", n)
	}
}
