package testkit

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
	"syscall"
	"testing"
	"time"
)

// EverythingVersion pins @modelcontextprotocol/server-everything, the
// official interop peer.
const EverythingVersion = "2026.8.31"

var (
	everythingOnce  sync.Once
	everythingEntry string
	everythingErr   error
)

// Everything returns server-everything's entry script (run it as
// `node <entry> stdio|sse|streamableHttp`), installing the pinned version
// with npm into MCPBUS_NPM_DIR (default $TMPDIR/mcpbus-npm) when it is not
// there. Test packages run in parallel processes: an exclusive file lock
// makes one install and the others wait for it. Node and npm are required;
// without them the test fails with a message saying so.
func Everything(t testing.TB) string {
	t.Helper()
	everythingOnce.Do(func() { everythingEntry, everythingErr = installEverything() })
	if everythingErr != nil {
		t.Fatalf("server-everything is not available: %v", everythingErr)
	}
	return everythingEntry
}

func installEverything() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is required for the server-everything interop tests (install Node.js; .ci/run does): %w", err)
	}
	dir := os.Getenv("MCPBUS_NPM_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "mcpbus-npm")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()

	pkgDir := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything")
	entry := filepath.Join(pkgDir, "dist", "index.js")
	if installedVersion(pkgDir) == EverythingVersion {
		return entry, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is required to install @modelcontextprotocol/server-everything (install Node.js): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund",
		"@modelcontextprotocol/server-everything@"+EverythingVersion).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm install @modelcontextprotocol/server-everything@%s into %s: %w\n%s", EverythingVersion, dir, err, out)
	}
	if v := installedVersion(pkgDir); v != EverythingVersion {
		return "", fmt.Errorf("npm installed server-everything %q into %s, want %s", v, dir, EverythingVersion)
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

// ServeEverything runs server-everything in mode ("sse" or
// "streamableHttp") on a free loopback port until the test ends and returns
// its base URL (http://127.0.0.1:<port>).
func ServeEverything(t testing.TB, mode string) string {
	t.Helper()
	entry := Everything(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command("node", entry, mode)
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed as a group
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("server-everything %s output:\n%s", mode, out.String())
			mu.Unlock()
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	Eventually(t, 30*time.Second, "server-everything "+mode+" listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return "http://" + addr
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// SDKVersion is the @modelcontextprotocol/sdk that the pinned
// server-everything depends on (and so installs with it): the official
// TypeScript SDK the client interop tests drive.
const SDKVersion = "1.32.2"

// SDK returns the directory of the official TypeScript SDK
// (node_modules/@modelcontextprotocol/sdk), installed with server-everything
// (Everything). Import its ESM entry points by absolute path, e.g.
// <dir>/dist/esm/client/index.js.
func SDK(t testing.TB) string {
	t.Helper()
	entry := Everything(t)
	// entry is <npm dir>/node_modules/@modelcontextprotocol/server-everything/dist/index.js.
	dir := filepath.Join(filepath.Dir(entry), "..", "..", "sdk")
	if v := installedVersion(dir); v != SDKVersion {
		t.Fatalf("@modelcontextprotocol/sdk in %s is %q, want %s (installed with server-everything %s)", dir, v, SDKVersion, EverythingVersion)
	}
	return filepath.Clean(dir)
}
