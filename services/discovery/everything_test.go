package discovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// everythingVersion pins @modelcontextprotocol/server-everything (the same
// version and npm cache directory as pkg/mcpclient's interop tests).
const everythingVersion = "2026.8.31"

var (
	everythingOnce  sync.Once
	everythingEntry string
	everythingErr   error
)

// everything returns server-everything's entry script, installing the
// pinned version with npm into MCPBUS_NPM_DIR (default $TMPDIR/mcpbus-npm)
// when it is not there yet.
func everything(t *testing.T) string {
	t.Helper()
	everythingOnce.Do(func() { everythingEntry, everythingErr = installEverything() })
	if everythingErr != nil {
		t.Fatalf("server-everything is not available: %v", everythingErr)
	}
	return everythingEntry
}

func installEverything() (string, error) {
	dir := os.Getenv("MCPBUS_NPM_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "mcpbus-npm")
	}
	pkgDir := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything")
	entry := filepath.Join(pkgDir, "dist", "index.js")
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is required for the server-everything interop test (install Node.js): %w", err)
	}
	if installedVersion(pkgDir) == everythingVersion {
		return entry, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund",
		"@modelcontextprotocol/server-everything@"+everythingVersion).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm install @modelcontextprotocol/server-everything@%s into %s: %w\n%s", everythingVersion, dir, err, out)
	}
	if v := installedVersion(pkgDir); v != everythingVersion {
		return "", fmt.Errorf("npm installed server-everything %q into %s, want %s", v, dir, everythingVersion)
	}
	return entry, nil
}

func installedVersion(pkgDir string) string {
	b, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Version
}

// serveEverything runs server-everything over sse or streamableHttp on a
// free port until the test ends and returns its base URL.
func serveEverything(t *testing.T, entry, mode string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command("node", entry, mode)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server-everything %s output:\n%s", mode, out.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	testkit.Eventually(t, 30*time.Second, "server-everything "+mode+" listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return "http://" + addr
}

// directTools lists a server's tools with the adapter directly.
func directTools(t *testing.T, spec mcpclient.Spec) map[string]mcpclient.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, spec)
	if err != nil {
		t.Fatalf("direct connect to %s: %v", spec.Server, err)
	}
	defer func() { _ = c.Close() }()
	list, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcpclient.Tool{}
	for _, tl := range list {
		out[tl.Name] = tl
	}
	return out
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestServerEverythingOverStdioSSEAndStreamableHTTP(t *testing.T) {
	t.Parallel()
	entry := everything(t)
	sseURL := serveEverything(t, entry, "sse") + "/sse"
	httpURL := serveEverything(t, entry, "streamableHttp") + "/mcp"
	b := start(t, cfgOf(
		srvJSON{"everything", fmt.Sprintf(`{"type": "stdio", "command": "node", "args": [%q, "stdio"]}`, entry)},
		srvJSON{"everything-sse", fmt.Sprintf(`{"type": "sse", "url": %q}`, sseURL)},
		srvJSON{"everything-http", httpServer(httpURL, "")},
	))
	r := mustList(t, b)
	if len(r.FailedServers) != 0 {
		t.Fatalf("failed servers: %+v", r.FailedServers)
	}
	want := directTools(t, mcpclient.Spec{Server: "direct", Transport: "stdio", Command: "node", Args: []string{entry, "stdio"}})
	for _, tool := range []string{"echo", "get-sum"} {
		if _, ok := want[tool]; !ok {
			t.Fatalf("server-everything has no %s tool", tool)
		}
	}
	for _, prefix := range []string{"everything", "everything-sse", "everything-http"} {
		n := 0
		for _, tl := range r.Tools {
			if tl.Server != prefix {
				continue
			}
			n++
			w, ok := want[tl.OriginalName]
			if !ok || tl.Name != prefix+"_"+tl.OriginalName {
				t.Errorf("%s: unexpected tool %s (%s)", prefix, tl.Name, tl.OriginalName)
				continue
			}
			if !jsonEqual(tl.InputSchema, w.InputSchema) || tl.Description != w.Description {
				t.Errorf("%s: schema or description of %s changed:\n got %s\nwant %s", prefix, tl.Name, tl.InputSchema, w.InputSchema)
			}
			if len(w.OutputSchema) > 0 && !jsonEqual(tl.OutputSchema, w.OutputSchema) {
				t.Errorf("%s: output schema of %s changed", prefix, tl.Name)
			}
		}
		if n != len(want) {
			t.Errorf("%s lists %d tools, the server has %d", prefix, n, len(want))
		}
	}
	if !hasTool(r, "everything-http_get-sum") || !hasTool(r, "everything-sse_echo") {
		t.Errorf("catalog lacks prefixed names: %v", names(r))
	}
}
