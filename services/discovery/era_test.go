package discovery_test

import (
	"net/http/httptest"
	"testing"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A modern-only upstream (the demo server's -era modern: server/discover
// lists 2026-07-28 alone, initialize is refused) is discovered: its tools
// are listed through tools.list, and the server status names the era it
// was spoken to in (a legacy fake's too), as does every catalog entry of
// it (server_era, which toolcall starts its connections in).
func TestModernOnlyServerIsDiscovered(t *testing.T) {
	t.Parallel()
	h, err := demo.NewHTTP(demo.EraModern, demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	legacy := newFake(t, tools("l", 1)...)
	b := start(t, cfgOf(srvJSON{"modern", httpServer(hs.URL+"/mcp", "")}, srvJSON{"legacy", httpServer(legacy.URL, "")}))
	r := mustList(t, b)
	if len(r.FailedServers) != 0 || !hasTool(r, "modern_echo") || !hasTool(r, "modern_progress") || !hasTool(r, "legacy_l0") {
		t.Fatalf("tools %v, failed %v", names(r), r.FailedServers)
	}
	want := map[string][2]string{"modern": {"modern", "2026-07-28"}, "legacy": {"legacy", "2025-11-25"}}
	for _, tl := range r.Tools {
		if tl.ServerEra != want[tl.Server][0] {
			t.Errorf("catalog entry %s: server_era %q, want %q", tl.Name, tl.ServerEra, want[tl.Server][0])
		}
	}
	for _, st := range servers(t, b, bus.ServersRequest{}).Servers {
		if w := want[st.Name]; st.State != bus.ServerStateOK || st.Era != w[0] || st.ProtocolVersion != w[1] {
			t.Errorf("status of %s = %+v, want ok in era %s at %s", st.Name, st, w[0], w[1])
		}
	}
}
