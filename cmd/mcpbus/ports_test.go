package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpExitsZero: -h of every command prints its help and exits 0.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-h"}, {"dev", "-h"}, {"serve", "-h"}, {"migrate", "-h"}, {"tools", "-h"}, {"tools", "list", "-h"},
		{"call", "-h"}, {"cache", "-h"}, {"cache", "reset", "-h"}, {"config", "-h"}, {"config", "validate", "-h"},
		{"stdio", "-h"}, {"stdio", "--help"}, {"audit", "-h"}, {"audit", "tail", "-h"}, {"keygen", "-h"},
	} {
		out, errOut, ok := runCLI(t, dir, cleanCLIEnv(), args...)
		if !ok {
			t.Errorf("mcpbus %s exited non-zero: %q %q", strings.Join(args, " "), out, errOut)
		}
		if !strings.Contains(out+errOut, "-") {
			t.Errorf("mcpbus %s printed no help", strings.Join(args, " "))
		}
	}
	if _, errOut, _ := runCLI(t, dir, cleanCLIEnv(), "dev", "-h"); !strings.Contains(errOut, "-nats-port") || !strings.Contains(errOut, "-api-listen") {
		t.Errorf("mcpbus dev -h does not list --nats-port and --api-listen: %q", errOut)
	}
}

// takePort listens on a loopback port for the test's duration and returns it.
func takePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestDevNamesATakenPort: `mcpbus dev` on a taken NATS or API port exits
// naming the port and the make variable and flag that move it.
func TestDevNamesATakenPort(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args func(port int) []string
		want string
	}{
		{"nats", func(p int) []string { return []string{"dev", "--nats-port", fmt.Sprint(p)} },
			"port %d is in use; set NATS_PORT (make run) or --nats-port"},
		{"api", func(p int) []string {
			return []string{"dev", "--nats-port", "-1", "--api-listen", fmt.Sprintf("127.0.0.1:%d", p)}
		}, "port %d is in use; set API_ADDR (make run) or --api-listen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			port := takePort(t)
			dir := t.TempDir()
			cmd := exec.Command(mcpbusBin, c.args(port)...)
			cmd.Dir, cmd.Env = dir, cleanCLIEnv("MCPBUS_API_LISTEN=")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("mcpbus dev on a taken %s port exited 0:\n%s", c.name, out)
			}
			if want := fmt.Sprintf(c.want, port); !strings.Contains(string(out), want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		})
	}
}

// TestMakeRunTakesItsAddresses: make run passes API_ADDR, NATS_PORT and
// DEMO_ADDR on to mcpbus dev and the demo server, and the copy of the
// example extensions config points the demohttp server at DEMO_ADDR (the
// example's own URL is the default DEMO_ADDR).
func TestMakeRunTakesItsAddresses(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-n", "-B", "-C", root, "run", "API_ADDR=127.0.0.1:9101", "NATS_PORT=5399", "DEMO_ADDR=127.0.0.1:9765")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	for _, want := range []string{
		"demo-server -transport http -addr 127.0.0.1:9765",
		"sed 's#http://127.0.0.1:8765/mcp#http://127.0.0.1:9765/mcp#' examples/extensions_config.example.json > extensions_config.json",
		"mcpbus dev --api-listen 127.0.0.1:9101 --nats-port 5399",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make run lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(filepath.Join(root, "examples", "extensions_config.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ext struct {
		MCPServers map[string]struct {
			URL string `json:"url"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &ext); err != nil {
		t.Fatal(err)
	}
	if got := ext.MCPServers["demohttp"].URL; got != "http://127.0.0.1:8765/mcp" {
		t.Errorf("the example's demohttp url is %q, not the default DEMO_ADDR's http://127.0.0.1:8765/mcp, which make run's copy replaces", got)
	}
}
