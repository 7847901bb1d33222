package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// runningWith returns the pid of a running (not zombie) process whose
// command line contains marker, or 0.
func runningWith(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, err2 := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || err2 != nil || !strings.Contains(string(cmdline), marker) {
			continue
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return pid
		}
	}
	return 0
}

// TestNoOrphanAfterTheGatewayIsKilled: alice's personal stdio server
// starts a grandchild that calls setsid; `mcpbus dev` is then SIGKILLed.
// The grandchild does not outlive it: it is gone once dev is started again
// (with isolation it dies with the gateway: its PID namespace dies with the
// server, which dies of its parent-death signal).
func TestNoOrphanAfterTheGatewayIsKilled(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("personal stdio needs root (uid %d)", os.Geteuid())
	}
	// Personal children run under uids of their own: everything they
	// run and their workspace must be reachable by other uids.
	dir, err := os.MkdirTemp("", "mcpbus-orphans-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	demo := filepath.Join(dir, "demo-server")
	data, err := os.ReadFile(demoBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(demo, data, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("%d.%d", 5000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
	script := fmt.Sprintf("setsid sleep %s </dev/null >/dev/null 2>&1 & exec %s", marker, demo)
	const key = "orphan-alice-key-0001"
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	settings := fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
personal_connections:
  stdio: true
  launch_specs:
    - name: leaver
      command: /bin/sh
      args: ["-c", %q]
`, apiAddr, sha(key), script)
	// No deployment stdio server: nothing is spawned at the restart that
	// could sweep the debris by chance.
	dev := startDevIn(t, dir, `{"mcpServers": {}}`, settings)

	def, _ := json.Marshal(map[string]any{"name": "leaver", "server": map[string]any{"type": "stdio", "command": "/bin/sh", "args": []string{"-c", script}}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+apiAddr+"/api/mcp/personal-connections", strings.NewReader(string(def)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		RuntimeName string `json:"runtime_name"`
	}
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil || created.RuntimeName == "" {
		t.Fatalf("personal connection: %d %+v %v", resp.StatusCode, created, err)
	}

	nc, err := nats.Connect(devNATSURL(t, dir), nats.Token(readToken(t, filepath.Join(dir, ".mcpbus", "nats.token"))))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	names, err := bus.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "alice's personal server to answer a call", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := bus.Request[bus.ToolsCallReply](ctx, nc, names.ToolsCall(),
			bus.ToolsCallRequest{Tool: created.RuntimeName + "_echo", Arguments: json.RawMessage(`{"message":"hi"}`), UserID: "alice", ThreadID: "t"})
		return err == nil
	})
	var grandchild int
	testkit.Eventually(t, 10*time.Second, "the setsid grandchild to run", func() bool {
		grandchild = runningWith(marker)
		return grandchild > 0
	})

	if err := dev.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.cmd.Wait()
	startDevIn(t, dir, `{"mcpServers": {}}`, settings)
	testkit.Eventually(t, 30*time.Second, "the grandchild of the killed gateway to be gone", func() bool { return runningWith(marker) == 0 })
}
