//go:build linux

package mcpclient_test

import (
	"context"
	"io"
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

// isolationHelperEnv makes this test binary print
// mcpclient.IsolationUnavailable() and exit (TestIsolationRefusedWhenNotRoot).
const isolationHelperEnv = "MCPCLIENT_ISOLATION_HELPER"

// printIsolation is the helper's whole run.
func printIsolation() {
	if err := mcpclient.IsolationUnavailable(); err != nil {
		_, _ = io.WriteString(os.Stdout, "unavailable: "+err.Error())
		return
	}
	_, _ = io.WriteString(os.Stdout, "available")
}

// TestStdioIsolatedChild: an isolated child runs under its RunAs uid as
// PID 1 of its own namespace and its /proc shows only its own processes:
// not this process, not another child. Killing it kills the setsid
// grandchild it left in its namespace.
func TestStdioIsolatedChild(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if err := mcpclient.IsolationUnavailable(); err == nil || !strings.Contains(err.Error(), "not root") {
			t.Fatalf("IsolationUnavailable as uid %d = %v, want a refusal naming root", os.Geteuid(), err)
		}
		return
	}
	out := testkit.SharedTempDir(t)
	if err := os.Chmod(out, 0o777); err != nil { // the child writes its findings here
		t.Fatal(err)
	}
	other := connect(t, mcpclient.Spec{Server: "other", Command: demoBin, Logger: testLogger(t)})
	probe := filepath.Join(out, "procs")
	// The shell lists /proc, tries this process's and the other child's
	// cmdline, and leaves a setsid grandchild before becoming the server.
	script := `{ ls /proc | grep '^[0-9]' | tr '\n' ' '; echo; cat /proc/` + strconv.Itoa(os.Getpid()) + `/cmdline /proc/` + strconv.Itoa(other.Pid()) + `/cmdline 2>&1 | tr '\0' ' '; } > "$1"
setsid sleep 7777.25 </dev/null >/dev/null 2>&1 &
exec "$0"`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "isolated", Command: "/bin/sh", Args: []string{"-c", script, demoBin, probe},
		EmptyEnv: true, Dir: out, RunAs: &mcpclient.Credential{UID: 61234, GID: 61234}, Isolate: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if pid := whoami(t, c, nil).Pid; pid != 1 {
		t.Errorf("the isolated server sees itself as pid %d, want 1 (its own PID namespace)", pid)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(c.Pid()) + "/status")
	if err != nil || !strings.Contains(string(status), "Uid:\t61234\t61234\t61234\t61234") {
		t.Errorf("isolated child status: %v\n%s", err, status)
	}
	b, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 2)
	if pids := strings.Fields(lines[0]); len(pids) > 4 {
		t.Errorf("the isolated child sees %d processes in /proc (%v), want only its own", len(pids), pids)
	}
	if len(lines) < 2 || strings.Contains(lines[1], demoBin) || strings.Contains(lines[1], "test.") {
		t.Errorf("the isolated child read another process's cmdline: %q", b)
	}
	testkit.Eventually(t, 10*time.Second, "the setsid grandchild to start", func() bool { return testkit.RunningWith("7777.25") > 0 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the grandchild to die with its namespace", func() bool { return testkit.RunningWith("7777.25") == 0 })
}

// TestIsolationRefusedWhenNotRoot: run as an unprivileged uid (this test
// binary re-executed as nobody), isolation is refused, saying why.
func TestIsolationRefusedWhenNotRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("this test switches to nobody and needs root (running as uid %d)", os.Geteuid())
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy nobody can run: the test binary's directory is private.
	bin := testkit.SharedExecutable(t, testkit.SharedTempDir(t), "isolation-helper.test", self)
	cmd := exec.Command(bin)
	cmd.Env = []string{isolationHelperEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if got := string(out); !strings.HasPrefix(got, "unavailable: ") || !strings.Contains(got, "uid 65534, not root") {
		t.Errorf("as nobody: %q, want isolation refused because mcpbus is not root", got)
	}
}
