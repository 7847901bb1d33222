package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A tools/call over /mcp whose HTTP upstream never answers (the demo
// server's hang tool) ends at the server's tool_call_timeout plus a
// margin with a clean tool error, not at the api's 120 s bound on a bus
// request: the catalog carries the timeout, the api waits that long for
// toolcall's reply and toolcall's call ends with the same deadline. The
// client's own deadline (60 s) is only a hang detector.
func TestMCPCallToAHangingUpstreamEndsAtItsTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	demoAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-faults", demoBin, "-transport", "http", "-addr", demoAddr, "-faults")
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"stuck": {"type": "http", "url": "http://%s/mcp", "tool_call_timeout": 1}}}`, demoAddr)
	settings := fmt.Sprintf("api:\n  listen: %s\n  keys:\n    - {sha256: %s, user_id: alice, role: user}\n", apiAddr, sha(mcpAliceKey))
	dev := startDevIn(t, dir, ext, settings)
	t.Cleanup(func() { dev.stop(t) })

	c := mcpClient(t, "http://"+apiAddr, mcpAliceKey)
	initialized(t, c, mcp.LATEST_PROTOCOL_VERSION)
	hang := ""
	for _, n := range listedNames(t, c) {
		if strings.HasSuffix(n, "hang") {
			hang = n
		}
	}
	if hang == "" {
		t.Fatal("the demo server's hang tool is not listed")
	}
	// callText fails the test when the call gets no answer within 60 s.
	text, isError := callText(t, c, hang, nil)
	if !isError || !strings.Contains(text, "upstream_timeout") {
		t.Fatalf("tools/call %s: isError=%v %q, want an upstream_timeout tool error", hang, isError, text)
	}
}
