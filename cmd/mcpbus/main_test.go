package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// binaries built once for the whole package.
var (
	mcpbusBin string
	demoBin   string
)

func TestMain(m *testing.M) {
	if demo := os.Getenv(benchRelayEnv); demo != "" { // BenchmarkMCPEndpoint's relay process
		err := runBenchRelay(demo)
		fmt.Fprintln(os.Stderr, "bench relay:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "mcpbus-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mcpbusBin = filepath.Join(dir, "mcpbus")
	demoBin = filepath.Join(dir, "demo-server")
	for _, b := range [][2]string{{mcpbusBin, "github.com/mcpbus/mcpbus/cmd/mcpbus"}, {demoBin, "github.com/mcpbus/mcpbus/examples/demoserver"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
			os.Exit(1)
		}
	}
	if url := os.Getenv("TEST_NATS_URL"); url != "" {
		// What runs that died left on the shared server (testkit.RandomNames
		// removes each test's namespace when the test ends).
		if n, err := testkit.SweepStaleNamespaces(url, time.Hour); err != nil {
			fmt.Fprintln(os.Stderr, "sweeping stale test namespaces:", err)
		} else if n > 0 {
			fmt.Fprintf(os.Stderr, "removed %d streams of test namespaces older than an hour from %s\n", n, url)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port for a child process (testkit.FreePort:
// below the ephemeral range, so no other process's connection takes it first).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
