package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestNoOrphanAfterTheGatewayIsKilled: alice's personal stdio server and a
// deployment stdio server each start a grandchild that calls setsid;
// `mcpbus dev` is then SIGKILLed. The personal grandchild dies with it (its
// PID namespace dies with the server, which dies of its parent-death
// signal); the deployment one is gone once dev is started again (the new
// process kills what the record of the dead one names).
func TestNoOrphanAfterTheGatewayIsKilled(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("personal stdio needs root (uid %d)", os.Geteuid())
	}
	// Personal children run under uids of their own: everything they
	// run and their workspace must be reachable by other uids.
	dir := testkit.SharedTempDir(t)
	demo := testkit.SharedExecutable(t, dir, "demo-server", demoBin)
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
	// The deployment server: an allowlisted command on PATH whose
	// grandchild's sleep is told apart by its start time.
	deployMarker := fmt.Sprintf("6%03d.%d", os.Getpid()%1000, time.Now().UnixNano()%1000000)
	leaver := filepath.Join(dir, "mcpbus-test-leaver")
	leaverScript := fmt.Sprintf("#!/bin/sh\nsetsid sleep %s </dev/null >/dev/null 2>&1 &\nexec %s\n", deployMarker, demo)
	if err := os.WriteFile(leaver, []byte(leaverScript), 0o755); err != nil {
		t.Fatal(err)
	}
	ext := `{"mcpServers": {"leaver": {"type": "stdio", "command": "mcpbus-test-leaver"}}}`
	env := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	dev := startDevIn(t, dir, ext, settings, env...)

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
			bus.Call{Tool: created.RuntimeName + "_echo", Arguments: json.RawMessage(`{"message":"hi"}`), UserID: "alice", ThreadID: "t"})
		return err == nil
	})
	testkit.Eventually(t, 10*time.Second, "the personal server's setsid grandchild to run", func() bool { return testkit.RunningWith(marker) > 0 })
	testkit.Eventually(t, 60*time.Second, "the deployment server to answer a call", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := bus.Request[bus.ToolsCallReply](ctx, nc, names.ToolsCall(),
			bus.Call{Tool: "leaver_echo", Arguments: json.RawMessage(`{"message":"hi"}`), UserID: "alice", ThreadID: "t"})
		return err == nil
	})
	deployed := testkit.RunningWith(deployMarker)
	if deployed == 0 {
		t.Fatal("the deployment server's setsid grandchild is not running")
	}
	deployedStart := testkit.RunningSince(deployed)

	if err := dev.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.cmd.Wait()
	testkit.Eventually(t, 10*time.Second, "the personal server's grandchild to die with the gateway", func() bool { return testkit.RunningWith(marker) == 0 })

	startDevIn(t, dir, ext, settings, env...)
	testkit.Eventually(t, 30*time.Second, "the deployment server's grandchild of the killed gateway to be gone", func() bool {
		return testkit.RunningSince(deployed) != deployedStart
	})
}
