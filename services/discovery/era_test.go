package discovery_test

import (
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

// A modern-only upstream (the demo server's -era modern: server/discover
// lists 2026-07-28 alone, initialize is refused) is discovered: its tools
// are listed through tools.list.
func TestModernOnlyServerIsDiscovered(t *testing.T) {
	t.Parallel()
	opts, versions, err := demo.EraOptions(demo.EraModern)
	if err != nil {
		t.Fatal(err)
	}
	s, err := demo.New(demo.Config{ServerOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(versions...)))
	t.Cleanup(hs.Close)
	b := start(t, cfgOf(srvJSON{"modern", httpServer(hs.URL+"/mcp", "")}))
	r := mustList(t, b)
	if len(r.FailedServers) != 0 || !hasTool(r, "modern_echo") || !hasTool(r, "modern_progress") {
		t.Fatalf("tools %v, failed %v", names(r), r.FailedServers)
	}
}
