package main_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binaries built once for the whole package.
var (
	mcpbusBin string
	demoBin   string
)

func TestMain(m *testing.M) {
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
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
