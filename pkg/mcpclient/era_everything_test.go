package mcpclient_test

import (
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// server-everything over stdio and streamable HTTP: whichever era the
// probe settles on, it is one mcpbus can speak (2026-07-28 only when
// server/discover lists it), and tools/list and a call work in it.
func TestEverythingEra(t *testing.T) {
	t.Parallel()
	entry := testkit.Everything(t)
	for _, transport := range []string{mcpclient.TransportStdio, mcpclient.TransportHTTP} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			spec := mcpclient.Spec{Server: "everything", Transport: transport, Command: "node", Args: []string{entry, "stdio"}, InheritEnv: true}
			if transport == mcpclient.TransportHTTP {
				spec = mcpclient.Spec{Server: "everything", Transport: transport, URL: testkit.ServeEverything(t, "streamableHttp") + "/mcp"}
			}
			c := connect(t, spec)
			info := c.ServerInfo()
			t.Logf("server-everything over %s: %+v", transport, info)
			switch info.Era {
			case mcpclient.EraModern:
				if info.ProtocolVersion != mcpclient.ModernProtocolVersion {
					t.Errorf("modern era at %s", info.ProtocolVersion)
				}
			case mcpclient.EraLegacy:
				if info.ProtocolVersion == mcpclient.ModernProtocolVersion || info.ProtocolVersion == "" {
					t.Errorf("legacy era at %q", info.ProtocolVersion)
				}
			default:
				t.Fatalf("era %q", info.Era)
			}
			findTool(t, listTools(t, c), "echo")
			if got := text(t, call(t, c, "echo", `{"message":"hello"}`, nil)); !strings.Contains(got, "hello") {
				t.Errorf("echo = %q", got)
			}
		})
	}
}
