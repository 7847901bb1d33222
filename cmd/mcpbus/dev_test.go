package main_test

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
	return dir, apiAddr, startDevIn(t, dir, ext, "api:\n  listen: "+apiAddr+"\n"+settings)
}

// startDevIn writes the extensions config and config.yaml into dir, starts
// `mcpbus dev` there with the extra environment and waits until it runs.
func startDevIn(t *testing.T, dir, ext, settings string, env ...string) *process {
	t.Helper()
	return startDevArgs(t, dir, ext, settings, nil, env...)
}

// startDevArgs is startDevIn with extra `mcpbus dev` flags.
func startDevArgs(t *testing.T, dir, ext, settings string, args []string, env ...string) *process {
	t.Helper()
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dev := startProcessEnv(t, dir, "dev", env, mcpbusBin, append([]string{"dev", "--nats-port", "-1"}, args...)...)
	testkit.Eventually(t, 60*time.Second, "dev mode to say it is running", func() bool {
		return strings.Contains(dev.out.String(), "mcpbus dev is running")
	})
	return dev
}

// devNATSURL is the URL (with its token) of the embedded NATS server that
// `mcpbus dev` in dir wrote to .mcpbus/nats.url.
func devNATSURL(t testing.TB, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, ".mcpbus", "nats.url"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
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
	// The services reach the embedded server in memory: with the call
	// done and no client of the test's connected yet, no TCP connection to
	// the NATS port exists (over loopback TCP there would be one per
	// service).
	if n := establishedTo(t, devNATSURL(t, dir)); n != 0 {
		t.Errorf("%d TCP connections to the embedded NATS server, want 0 (the services connect in-process)", n)
	}
	cmd := exec.Command(mcpbusBin, "call", "demo_add", `{"a":1,"b":2}`)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=")
	out, err := cmd.Output() // stdout: stderr names the deployment
	if err != nil || strings.TrimSpace(string(out)) != "3" {
		t.Fatalf("mcpbus call through .mcpbus/nats.url: %v %q", err, out)
	}

	// The embedded server asks for the token dev mode wrote for its CLI,
	// readable by its owner only; a client without it is refused.
	natsURL := devNATSURL(t, dir)
	tokenPath := filepath.Join(dir, ".mcpbus", "nats.token")
	if fi, err := os.Stat(tokenPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v", err, fi)
	}
	if strings.Contains(dev.out.String(), readToken(t, tokenPath)) {
		t.Error("dev mode printed its NATS token")
	}
	if nc, err := nats.Connect(natsURL); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("a connection without the token: %v", err)
	}
	if nc, err := nats.Connect(natsURL, nats.Token("not-the-token")); err == nil {
		nc.Close()
		t.Fatal("a connection with a wrong token was accepted")
	}
	nc, err := nats.Connect(natsURL, nats.Token(readToken(t, tokenPath)))
	if err != nil {
		t.Fatalf("a connection with the token: %v", err)
	}
	nc.Close()

	dev.stop(t)
	checkDevOrder(t, dev.out.String())
	for _, f := range []string{"nats.url", "nats.token"} {
		if _, err := os.Stat(filepath.Join(dir, ".mcpbus", f)); !os.IsNotExist(err) {
			t.Errorf("%s left behind after stop: %v", f, err)
		}
	}
}

// establishedTo counts the established TCP connections of this machine
// whose remote end is natsURL's port (from /proc/net/tcp and tcp6).
func establishedTo(t *testing.T, natsURL string) int {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("nats url %s has no port", u.Redacted())
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			// sl local_address rem_address st ...; 01 is ESTABLISHED.
			fields := strings.Fields(line)
			if len(fields) > 3 && strings.HasSuffix(fields[2], want) && fields[3] == "01" {
				n++
			}
		}
	}
	return n
}

// checkDevOrder requires dev mode's output to show the services started
// in dependency order, each once the one before it was ready, and stopped
// in reverse, each stopped (drained) before the next was told to stop.
func checkDevOrder(t *testing.T, out string) {
	t.Helper()
	order := []string{"tokens", "discovery", "toolcall", "taskpoller", "api"}
	var want []string
	for _, s := range order {
		want = append(want, "mcpbus dev: "+s+" started")
	}
	for i := len(order) - 1; i >= 0; i-- {
		want = append(want, "mcpbus dev: stopping "+order[i], "mcpbus dev: "+order[i]+" stopped")
	}
	var got []string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "mcpbus dev: ") && line != "mcpbus dev: stopping" {
			got = append(got, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dev mode's start and stop lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
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
	// The operator mistakes `config validate` used to pass.
	mistakes := write("mistakes.json", `{"mcpServers": {
		"typo": {"type": "http", "url": "http://h/mcp", "tool_call_timout": 5},
		"noscheme": {"type": "http", "url": "h:8080/mcp"},
		"ftp": {"type": "sse", "url": "ftp://h/sse"},
		"space": {"type": "http", "url": "http://h/mcp", "headers": {"X Key": "v"}}
	}, "mcpInterceptors": ["nope"]}`)
	out, code = run("--extensions-config", mistakes)
	if code != 1 {
		t.Errorf("mistakes exited %d:\n%s", code, out)
	}
	for _, want := range []string{
		"server 'typo': tool_call_timout: unknown key 'tool_call_timout' (did you mean 'tool_call_timeout'?)",
		"server 'noscheme': url: must use http or https", "server 'ftp': url: must use http or https, got scheme 'ftp'",
		"server 'space': headers: has a header name that is not a valid HTTP token", "mcpInterceptors[0]: no interceptor named 'nope'",
		"5 error(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
