package main_test

import (
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

// conformanceClient runs `mcpbus conformance-client url` as the
// conformance suite does, with the scenario's environment.
func conformanceClient(t *testing.T, url string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(mcpbusBin, "conformance-client", url)
	cmd.Dir = t.TempDir()
	cmd.Env = append(append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL="), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The conformance suite's client under test lists the scenario server's
// tools and calls the ones MCP_CONFORMANCE_CONTEXT names through an
// in-process mcpbus: here against the demo server in its modern-only mode
// (2026-07-28), so the upstream requests are discovery's and toolcall's.
// A server it cannot discover fails the run.
func TestConformanceClient(t *testing.T) {
	t.Parallel()
	h, err := demo.NewHTTP(demo.EraModern, demo.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)

	out, err := conformanceClient(t, hs.URL+"/mcp", "MCP_CONFORMANCE_SCENARIO=tools_call",
		`MCP_CONFORMANCE_CONTEXT={"name":"tools_call","toolCalls":[{"name":"echo","arguments":{"message":"through mcpbus"}}]}`)
	if err != nil {
		t.Fatalf("conformance-client: %v\n%s", err, out)
	}
	for _, want := range []string{"tool echo (upstream echo)", `call echo: is_error=false content=[{"type":"text","text":"through mcpbus"}]`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Nothing listens on a port that was just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out, err = conformanceClient(t, "http://"+addr+"/mcp", "MCP_CONFORMANCE_SCENARIO=tools_call")
	if err == nil || !strings.Contains(out, "tools/list through mcpbus: unavailable: every enabled MCP server failed discovery") {
		t.Errorf("conformance-client against nothing: err %v, output:\n%s", err, out)
	}
}
