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
	pkgDir, err := installNPM("@modelcontextprotocol/server-everything", EverythingVersion, "for the server-everything interop tests")
	if err != nil {
		return "", err
	}
	return filepath.Join(pkgDir, "dist", "index.js"), nil
}

// installNPM installs name@version with npm into MCPBUS_NPM_DIR (default
// $TMPDIR/mcpbus-npm) unless that version is there, under an exclusive
// file lock (test packages run in parallel processes), and returns the
// package's directory. why completes "node is required …".
func installNPM(name, version, why string) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is required %s (install Node.js; .ci/run does): %w", why, err)
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

	pkgDir := filepath.Join(dir, "node_modules", filepath.FromSlash(name))
	if installedVersion(pkgDir) == version {
		return pkgDir, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is required to install %s (install Node.js): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund",
		name+"@"+version).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("npm install %s@%s into %s: %w\n%s", name, version, dir, err, out)
	}
	if v := installedVersion(pkgDir); v != version {
		return "", fmt.Errorf("npm installed %s %q into %s, want %s", name, v, dir, version)
	}
	return pkgDir, nil
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
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return serveNode(t, "server-everything "+mode, port, []string{entry, mode}, fmt.Sprintf("PORT=%d", port))
}

// serveNode runs node with args and env (added to the test's environment)
// until the test ends, waits until 127.0.0.1:port accepts connections and
// returns http://127.0.0.1:port. Its output is logged when the test fails.
func serveNode(t testing.TB, label string, port int, args []string, env ...string) string {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), env...)
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
			t.Logf("%s output:\n%s", label, out.String())
			mu.Unlock()
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	Eventually(t, 30*time.Second, label+" listening", func() bool {
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
