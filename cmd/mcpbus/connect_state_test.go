package main_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestAPerUserServerWaitsForAUser: before anyone connects an account, a
// per-user OAuth server is not a failing server. GET /api/mcp/servers
// shows it as needs_auth (not failed), and the catalog's failed_servers
// entry carries code auth_required, which the console's Overview counts
// as "waiting for a user to connect" rather than "failing discovery".
// Once Bob connects, the server is discovered at once (the tokens service
// asks discovery to rediscover it; no retry delay), and it shows as ok.
func TestAPerUserServerWaitsForAUser(t *testing.T) {
	t.Parallel()
	st := startConnectStack(t)

	// refresh=false: the state as discovery holds it, no lookup run for
	// the asking.
	ghState := func() (string, string) {
		_, body := st.rest(t, "GET", "/api/mcp/servers?refresh=false", rootKey, "")
		list, _ := body["servers"].([]any)
		for _, s := range list {
			m, _ := s.(map[string]any)
			if m["name"] == "gh" {
				return fmt.Sprint(m["state"]), fmt.Sprint(m["last_error"])
			}
		}
		return "", ""
	}
	testkit.Eventually(t, 60*time.Second, "gh discovered once (and waiting)", func() bool {
		s, _ := ghState()
		return s != "pending" && s != ""
	})
	if s, why := ghState(); s != "needs_auth" || !strings.Contains(why, "connected") {
		t.Fatalf("gh before anyone connects: state %q, last_error %q; want needs_auth", s, why)
	}
	_, body := st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
	failed, _ := body["failed_servers"].([]any)
	var gh map[string]any
	for _, f := range failed {
		if m, _ := f.(map[string]any); m["server"] == "gh" {
			gh = m
		}
	}
	if gh == nil || gh["code"] != "auth_required" {
		t.Fatalf("gh in alice's failed_servers before anyone connects: %v (all: %v)", gh, failed)
	}

	bobConnects(t, st)
	testkit.Eventually(t, 60*time.Second, "gh ok after bob connects", func() bool {
		s, _ := ghState()
		return s == "ok"
	})
	_, body = st.rest(t, "GET", "/api/mcp/tools", aliceKey, "")
	if !slices.Contains(toolNames(body), "gh_whoami") {
		t.Fatalf("gh's tools after bob connected: %v", toolNames(body))
	}
}
