package main_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// consoleDir holds the browser suite (console.mjs) and its npm manifest;
// its node_modules is installed by the test and ignored by git.
const consoleDir = "testdata/console"

// consoleDeps installs the suite's npm packages (playwright-core,
// axe-core) from the committed lock when they are missing or the lock
// changed.
func consoleDeps(t *testing.T) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(consoleDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	stamp := filepath.Join(consoleDir, "node_modules", ".lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == hex.EncodeToString(sum[:]) {
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm is required for the console's browser tests (install Node.js; .ci/run does): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = consoleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", consoleDir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(hex.EncodeToString(sum[:])), 0o644); err != nil {
		t.Fatal(err)
	}
}

// chromiumPath is Debian's Chromium (CHROMIUM overrides).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("Chromium is required for the console's browser tests: apt-get install -y chromium (.ci/run does): %v", err)
	}
	return p
}

// TestConsoleInBrowser runs the console's browser suite (console.mjs:
// Playwright driving Chromium, axe-core over every page) against a real
// `mcpbus dev` with the demo server and API keys for an admin and a plain
// user: sign in, the Servers page's tool, resource, prompt and pin counts,
// add a server and see its tools, search resources and prompts, read a
// resource (text and a binary download), a template and a prompt whose
// arguments the server completes, follow a result's resource link, call a
// tool from the playground with progress and with cancel, submit a durable task and
// watch it finish without reload, read and follow the audit, add a
// personal connection; then a plain user who cannot open admin pages (by
// URL too) nor see the admin's connections and tasks, a change without
// the CSRF token and a cross-origin page, both refused, and the
// guardrail-denied server's resources and prompt, neither listed to her nor
// readable with her session. It then checks
// that the console's changes were audited under the signed-in users.
// Screenshots go to a temporary folder, or to docs/console with
// MCPBUS_CONSOLE_SCREENSHOTS=1 (make console-screenshots).
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	consoleDeps(t)
	const adminKey, aliceKey = "console-admin-key-0001", "console-alice-key-0002"
	dir := t.TempDir()
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + apiAddr
	// gh: the demo server behind oidc-provider, each user connects their
	// own account; drifty: a pinned server whose tools change.
	issuer, ghDemo := startOAuthDemo(t, dir)
	drifty, driftyURL := driftyServer(t)
	// demo and secret serve resources, a template and prompts
	// (-federation); the guardrails deny everything of secret.
	ext := fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q, "args": ["-transport", "stdio", "-federation"], "task_toolsets": [
		{"name": "report-generation", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]},
		"gh": %s,
		"drifty": {"type": "http", "url": %q, "pinning": "require_approval"},
		"secret": {"type": "stdio", "command": %q, "args": ["-federation"], "env": {"DEMO_INSTANCE": "SECRET"}}}}`, demoBin, oauthServerEntry(ghDemo), driftyURL, demoBin)
	settings := fmt.Sprintf(`api:
  listen: %s
  public_url: %s
  keys:
    - {sha256: %s, user_id: root, role: admin}
    - {sha256: %s, user_id: alice, role: user}
mcp_tasks:
  enabled: true
  poll_interval_seconds: 1
guardrails:
  enabled: true
  provider:
    use: allowlist
    config:
      denied_tools: ["server:secret"]
`, apiAddr, base, sha(adminKey), sha(aliceKey))
	credKey, _ := crypto.NewKey()
	startDevIn(t, dir, ext, settings, "MCPBUS_CREDENTIALS_KEY="+credKey)

	// The rug pull happens before the browser opens: drifty's first
	// definitions are pinned, then changed; the admin approves in the
	// browser.
	testkit.Eventually(t, 60*time.Second, "drifty's tools in the catalog", func() bool {
		return catalogTool(t, base, adminKey, "drifty_lookup") != nil
	})
	rugPull(t, drifty, base, adminKey)

	shots := t.TempDir()
	if os.Getenv("MCPBUS_CONSOLE_SCREENSHOTS") == "1" {
		shots, _ = filepath.Abs("../../docs/console")
	}
	runConsoleSuite(t, chromium, "admin-and-user", "CONSOLE_BASE="+base, "CONSOLE_ADMIN_KEY="+adminKey, "CONSOLE_ALICE_KEY="+aliceKey,
		"CONSOLE_DEMO_BIN="+demoBin, "CONSOLE_ISSUER="+issuer, "CONSOLE_SCREENSHOTS="+shots)
	for _, f := range []string{"overview.png", "servers.png", "catalog.png", "tasks.png", "audit.png", "connections.png", "approvals.png", "connect.png", "narrow-catalog.png", "prompt.png"} {
		b, err := os.ReadFile(filepath.Join(shots, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}

	// Every change made in the browser is audited under the signed-in
	// user: root's sign-in, server save and tool calls, alice's sign-in.
	req, _ := http.NewRequest("GET", base+"/api/mcp/audit?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	audit := string(raw)
	for _, want := range []string{`"user":"root","action":"console_sign_in"`, `"user":"alice","action":"console_sign_in"`,
		`"user":"root","action":"put_config"`, `"tool":"demo_progress"`, `"user":"root","action":"approve_tool"`,
		`"user":"root","action":"oauth_connect"`, `"user":"root","action":"oauth_disconnect"`} {
		if !containsRecord(audit, want) {
			t.Errorf("the audit lacks %s:\n%s", want, audit)
		}
	}
}

// runConsoleSuite runs one suite of console.mjs (CONSOLE_SUITE) in
// Chromium with env and fails the test unless it passes.
func runConsoleSuite(t *testing.T, chromium, suite string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "console.mjs")
	cmd.Dir = consoleDir
	cmd.Env = append(append(os.Environ(), "CHROMIUM="+chromium, "CONSOLE_SUITE="+suite), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("browser suite %s:\n%s", suite, out.String())
	if err != nil || !strings.Contains(out.String(), "\nPASS") {
		t.Fatalf("the browser suite %s failed: %v", suite, err)
	}
}

// TestConsoleCatalogOf10000Tools: the console's catalog over 10,000 tools
// (20 HTTP servers of 500 tools) stays a page at a time: every request the
// page makes for the catalog asks the server for one page (25 tools), the
// list shows 25, the next page is one more such request, and a server-side
// search finds a tool deep in the catalog (the last server's last tool).
func TestConsoleCatalogOf10000Tools(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	consoleDeps(t)
	const adminKey = "console-catalog-admin-0001"
	servers := map[string]any{}
	for i, u := range toolsServers(t, 20, 500) {
		servers[fmt.Sprintf("s%03d", i)] = map[string]any{"type": "http", "url": u}
	}
	ext, _ := json.Marshal(map[string]any{"mcpServers": servers})
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + apiAddr
	startDevIn(t, t.TempDir(), string(ext), fmt.Sprintf("api:\n  listen: %s\n  keys:\n    - {sha256: %s, user_id: root, role: admin}\n", apiAddr, sha(adminKey)))
	testkit.Eventually(t, 120*time.Second, "the whole catalog of 10,000 tools", func() bool {
		status, body := keyedJSON(t, "GET", base+"/api/mcp/tools?limit=1", adminKey, "")
		return status == 200 && body["total"] == float64(10000)
	})
	runConsoleSuite(t, chromium, "catalog-10000", "CONSOLE_BASE="+base, "CONSOLE_ADMIN_KEY="+adminKey)
}

// containsRecord reports whether one audit record holds every
// "key":value pair of want (records' fields come in struct order, with
// others between them).
func containsRecord(audit, want string) bool {
	pairs := strings.Split(want, `,"`)
	for _, rec := range strings.Split(audit, "},{") {
		all := true
		for i, p := range pairs {
			if i > 0 {
				p = `"` + p
			}
			if !strings.Contains(rec, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
