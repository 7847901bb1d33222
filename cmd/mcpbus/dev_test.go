package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// startDev runs `mcpbus dev` in a new folder with the demo server as the
// one MCP server and config.yaml holding an api address plus settings, and
// waits until it says it is running.
func startDev(t *testing.T, settings string) (dir, apiAddr string, dev *process) {
	t.Helper()
	dir = t.TempDir()
	apiAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin)
	if err := os.WriteFile(filepath.Join(dir, "extensions_config.json"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("api:\n  listen: "+apiAddr+"\n"+settings), 0o600); err != nil {
		t.Fatal(err)
	}
	dev = startProcess(t, dir, "dev", mcpbusBin, "dev", "--nats-port", "-1")
	testkit.Eventually(t, 60*time.Second, "dev mode to say it is running", func() bool {
		return strings.Contains(dev.out.String(), "mcpbus dev is running")
	})
	return dir, apiAddr, dev
}

// TestDevModeRunsEverythingInOneProcess is `make run` without make: one
// process with embedded NATS and SQLite, reached over REST and by the CLI
// through the URL file dev mode writes.
func TestDevModeRunsEverythingInOneProcess(t *testing.T) {
	t.Parallel()
	dir, apiAddr, dev := startDev(t, "")
	for _, want := range []string{"tokens, discovery, toolcall, taskpoller, api", "sqlite", "http://" + apiAddr} {
		if !strings.Contains(dev.out.String(), want) {
			t.Errorf("dev output lacks %q:\n%s", want, dev.out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".mcpbus", "mcpbus.db")); err != nil {
		t.Errorf("sqlite database: %v", err)
	}

	status, body := httpJSON(t, "POST", "http://"+apiAddr+"/api/mcp/tools/demo_echo/call", `{"arguments":{"message":"hi"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:hi") {
		t.Fatalf("call: %d %v", status, body)
	}
	cmd := exec.Command(mcpbusBin, "call", "demo_add", `{"a":1,"b":2}`)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("mcpbus call through .mcpbus/nats.url: %v %q", err, out)
	}

	dev.stop(t)
	if _, err := os.Stat(filepath.Join(dir, ".mcpbus", "nats.url")); !os.IsNotExist(err) {
		t.Errorf("nats.url left behind after stop: %v", err)
	}
}

// TestDevModeHonoursAnExplicitMemoryBackend: `database.backend: memory` in
// config.yaml is not silently replaced with SQLite; dev mode runs on it and
// says so.
func TestDevModeHonoursAnExplicitMemoryBackend(t *testing.T) {
	t.Parallel()
	dir, apiAddr, dev := startDev(t, "database:\n  backend: memory\n")
	out := dev.out.String()
	if !strings.Contains(out, "database:   memory") || !strings.Contains(out, "dev mode uses the memory database") {
		t.Errorf("dev output does not say it runs on memory:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".mcpbus", "mcpbus.db")); !os.IsNotExist(err) {
		t.Errorf("a sqlite database was created: %v", err)
	}
	status, body := httpJSON(t, "POST", "http://"+apiAddr+"/api/mcp/tools/demo_echo/call", `{"arguments":{"message":"hi"}}`)
	if status != 200 || !strings.Contains(fmt.Sprint(body["content"]), "text:hi") {
		t.Fatalf("call: %d %v", status, body)
	}
	dev.stop(t)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"mcpServers": {"demo": {"command": "demo"}}}`)
	bad := write("bad.json", `{"mcpServers": {
		"nocmd": {"type": "stdio"},
		"weird": {"type": "carrier-pigeon"},
		"ok": {"type": "http", "url": "http://x/mcp", "headers": {"X-Key": "hunter2-secret", "x-key": "again"}}
	}}`)
	settings := write("bad.yaml", "mcp_tasks:\n  poll_interval_seconds: 0\n")
	run := func(args ...string) (string, int) {
		cmd := exec.Command(mcpbusBin, append([]string{"config", "validate"}, args...)...)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := run("--extensions-config", good); code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("good config: exit %d\n%s", code, out)
	}
	out, code := run("--extensions-config", bad, "--config", settings)
	if code == 0 {
		t.Errorf("bad config exited 0:\n%s", out)
	}
	for _, want := range []string{"nocmd", "command", "weird", "carrier-pigeon", "two spellings", "poll_interval_seconds"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2-secret") {
		t.Errorf("output echoes a header value:\n%s", out)
	}
}
