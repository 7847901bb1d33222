package discovery_test

import (
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// TestServersListInvalidServers: a server skipped for a bad field is listed
// with state invalid and the reason (field and rule), next to the servers
// that run.
func TestServersListInvalidServers(t *testing.T) {
	t.Parallel()
	web := newFake(t, tools("w", 1)...)
	b := start(t, cfgOf(srvJSON{"web", httpServer(web.URL, "")},
		srvJSON{"bad", `{"type": "http", "url": "ftp://files/mcp", "tool_call_timout": 5}`}))
	mustList(t, b)
	got := map[string]bus.ServerStatus{}
	for _, s := range servers(t, b, bus.ServersRequest{}).Servers {
		got[s.Name] = s
	}
	bad := got["bad"]
	if bad.State != bus.ServerStateInvalid || !strings.Contains(bad.LastError, "url: must use http or https, got scheme 'ftp'") ||
		!strings.Contains(bad.LastError, "tool_call_timout: unknown key 'tool_call_timout' (did you mean 'tool_call_timeout'?)") {
		t.Errorf("bad = %+v; want state invalid with both reasons", bad)
	}
	if got["web"].State != bus.ServerStateOK {
		t.Errorf("web = %+v; want ok", got["web"])
	}
}
