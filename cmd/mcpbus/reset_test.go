package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestCacheResetAsAnOperator: `mcpbus dev` with two demo servers over
// stdio, "fast" and "slow"; slow's next start is held (a gate file, as an
// npx server fetching its package would be slow). With a call in flight on
// fast, POST /api/mcp/cache/reset answers 200 with the next generation and
// every replica's acknowledgement; the catalog is read at once and still
// lists slow's tools; the call in flight answers; fast's stdio process
// survives (same pid); once slow starts, its fresh discovery shows on
// GET /api/mcp/servers.
func TestCacheResetAsAnOperator(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + apiAddr
	ext := fmt.Sprintf(`{"mcpServers": {
		"fast": {"command": %q},
		"slow": {"command": %q, "args": ["-init-gate", %q], "session_init_timeout": 600}}}`, demoBin, demoBin, gate)
	dev := startDevIn(t, dir, ext, fmt.Sprintf("api:\n  listen: %s\n", apiAddr))
	t.Cleanup(func() { dev.stop(t) })

	var before map[string]any
	testkit.Eventually(t, 60*time.Second, "both servers in the catalog", func() bool {
		status, body := httpJSON(t, "GET", base+"/api/mcp/tools", "")
		before = body
		names := toolNames(body)
		return status == 200 && slices.Contains(names, "fast_echo") && slices.Contains(names, "slow_echo")
	})
	pid := restWhoamiPid(t, base, "fast_whoami")
	slowAt := discoveredAt(t, base, "slow")

	// Slow's next start waits for the gate; a call runs on fast.
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() {
		status, body := httpJSON(t, "POST", base+"/api/mcp/tools/fast_slow/call", `{"arguments": {"seconds": 2}}`)
		if status != 200 || body["is_error"] == true {
			inFlight <- fmt.Errorf("%d %v", status, body)
			return
		}
		inFlight <- nil
	}()

	status, reset := httpJSON(t, "POST", base+"/api/mcp/cache/reset", `{}`)
	gen, _ := reset["generation"].(float64)
	if status != 200 || reset["success"] != true || gen <= before["generation"].(float64) {
		t.Fatalf("reset: %d %v; want 200 with a generation above %v", status, reset, before["generation"])
	}
	acks, _ := reset["acknowledged"].(map[string]any)
	for _, svc := range []string{"discovery", "toolcall"} {
		a, _ := acks[svc].(map[string]any)
		if a["replicas"] != 1.0 || a["acknowledged"] != 1.0 {
			t.Errorf("reset's acknowledgements by %s: %v; want 1 of 1 (all: %v)", svc, a, acks)
		}
	}

	status, after := httpJSON(t, "GET", base+"/api/mcp/tools", "")
	names := toolNames(after)
	if status != 200 || after["generation"] != gen || !slices.Contains(names, "fast_echo") || !slices.Contains(names, "slow_echo") {
		t.Fatalf("catalog after the reset: %d generation %v (want %v), tools %v", status, after["generation"], gen, names)
	}
	if err := testkit.Receive(t, 60*time.Second, "the call in flight during the reset", inFlight); err != nil {
		t.Errorf("the call in flight during the reset: %v", err)
	}
	if again := restWhoamiPid(t, base, "fast_whoami"); again != pid {
		t.Errorf("fast's stdio process %v did not survive the reset (now %v)", pid, again)
	}
	if at := discoveredAt(t, base, "slow"); at != slowAt {
		t.Errorf("slow rediscovered (%s, was %s) while its start is held", at, slowAt)
	}

	// Slow starts: its fresh discovery replaces the previous one.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "slow's rediscovery", func() bool { return discoveredAt(t, base, "slow") != slowAt })
}

// restWhoamiPid calls a demo server's whoami over REST and returns its pid.
func restWhoamiPid(t *testing.T, base, tool string) any {
	t.Helper()
	status, body := httpJSON(t, "POST", base+"/api/mcp/tools/"+tool+"/call", `{"arguments": {}}`)
	sc, _ := body["structured_content"].(map[string]any)
	if status != 200 || sc["pid"] == nil {
		t.Fatalf("%s: %d %v", tool, status, body)
	}
	return sc["pid"]
}

// discoveredAt is server's discovered_at on GET /api/mcp/servers, without
// a refresh.
func discoveredAt(t *testing.T, base, server string) string {
	t.Helper()
	status, body := httpJSON(t, "GET", base+"/api/mcp/servers?refresh=false", "")
	servers, _ := body["servers"].([]any)
	for _, s := range servers {
		m, _ := s.(map[string]any)
		if m["name"] == server {
			at, _ := m["discovered_at"].(string)
			return at
		}
	}
	t.Fatalf("server %s not on /api/mcp/servers: %d %v", server, status, body)
	return ""
}
