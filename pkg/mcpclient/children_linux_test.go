//go:build linux

package mcpclient_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// gatewayHelperEnv makes this test binary a gateway that records its stdio
// children in the directory named by the variable, starts one that leaves
// grandchildren, says "ready" and waits to be killed.
const gatewayHelperEnv = "MCPCLIENT_GATEWAY_HELPER"

func runGatewayHelper(dir string) {
	if _, err := mcpclient.TrackChildren(dir); err != nil {
		fmt.Println("track:", err)
		os.Exit(1)
	}
	marker := os.Getenv("MARKER")
	// One grandchild stays in the server's process group, one leaves it
	// with setsid; the server's parent-death signal reaches neither.
	script := `sleep ` + marker + `1 </dev/null >/dev/null 2>&1 &
setsid sleep ` + marker + `2 </dev/null >/dev/null 2>&1 &
exec "$0"`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "leaver", Command: "/bin/sh", Args: []string{"-c", script, os.Getenv("DEMO_BIN")}}); err != nil {
		fmt.Println("connect:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}

// TestTrackChildrenKillsWhatAKilledGatewayLeft: a gateway recording its
// children is SIGKILLed while its stdio server has a grandchild in its
// process group and one that called setsid; both survive it. The next
// process to track children in the same directory kills both at start,
// and leaves alone an unrelated process whose pid a record names with
// another start time (a reused pid).
func TestTrackChildrenKillsWhatAKilledGatewayLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := fmt.Sprintf("%d.%d", 4000+os.Getpid()%1000, time.Now().UnixNano()%100000)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	gw := exec.Command(self)
	gw.Env = append(os.Environ(), gatewayHelperEnv+"="+dir, "MARKER="+marker, "DEMO_BIN="+demoBin)
	out, err := gw.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Process.Kill(); _ = gw.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("gateway helper: %q %v", line, err)
	}
	var inGroup, escaped int
	testkit.Eventually(t, 10*time.Second, "the grandchildren to run", func() bool {
		inGroup, escaped = testkit.RunningWith(marker+"1"), testkit.RunningWith(marker+"2")
		return inGroup > 0 && escaped > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(inGroup, syscall.SIGKILL); _ = syscall.Kill(escaped, syscall.SIGKILL) })

	// An unrelated process, and a stale record naming its pid with
	// another start time.
	bystander := exec.Command("sleep", "1000")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bystander.Process.Kill(); _ = bystander.Wait() })
	stale := filepath.Join(dir, "999999999-1")
	if err := os.WriteFile(stale, []byte(strconv.Itoa(bystander.Process.Pid)+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := gw.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = gw.Wait()
	if testkit.RunningWith(marker+"1") != inGroup || testkit.RunningWith(marker+"2") != escaped {
		t.Fatal("the grandchildren died with the gateway: nothing to clean up")
	}

	cleared, err := mcpclient.TrackChildren(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cleared != 2 {
		t.Errorf("cleared %d records, want 2 (the killed gateway's and the stale one)", cleared)
	}
	testkit.Eventually(t, 10*time.Second, "the killed gateway's grandchildren to be gone", func() bool {
		return testkit.RunningWith(marker+"1") == 0 && testkit.RunningWith(marker+"2") == 0
	})
	if err := syscall.Kill(bystander.Process.Pid, 0); err != nil {
		t.Errorf("the bystander whose pid a stale record named was killed: %v", err)
	}
	for _, gone := range []string{stale, filepath.Join(dir, strconv.Itoa(gw.Process.Pid)+"-*")} {
		if m, _ := filepath.Glob(gone); len(m) > 0 {
			t.Errorf("record %v is left", m)
		}
	}
}
