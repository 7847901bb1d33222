//go:build linux

package mcpclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// escapingSpec is the demo server behind a shell that first starts a
// grandchild which calls setsid (a new session and process group, so a kill
// of the server's group misses it) and writes its pid to pidFile.
func escapingSpec(t *testing.T, pidFile string) mcpclient.Spec {
	script := `setsid sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 1000' _ "$1" </dev/null >/dev/null 2>&1 &
while [ ! -s "$1" ]; do sleep 0.01; done
exec "$0"`
	return mcpclient.Spec{Server: "escaper", Command: "sh", Args: []string{"-c", script, demoBin, pidFile}, Logger: testLogger(t)}
}

// stat returns the process group and session of pid.
func statOf(t *testing.T, pid int) (pgrp, session int) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("reading stat of %d: %v", pid, err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	pgrp, _ = strconv.Atoi(f[2])
	session, _ = strconv.Atoi(f[3])
	return pgrp, session
}

// checkSetsidChildDies: the escaped grandchild is gone once Close returns.
func checkSetsidChildDies(t *testing.T) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, escapingSpec(t, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Pid()
	escaped := readPidFile(t, pidFile)
	if pgrp, sid := statOf(t, escaped); pgrp == leader || sid != escaped {
		t.Fatalf("the grandchild did not escape: pgrp %d sid %d, server group %d", pgrp, sid, leader)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGone(t, escaped)
	waitGone(t, -leader)
}

// TestStdioSetsidGrandchildDiesWithTheSession: issue 11 item 8, with a
// session cgroup (cgroup.kill) where the machine has one.
func TestStdioSetsidGrandchildDiesWithTheSession(t *testing.T) {
	t.Parallel()
	checkSetsidChildDies(t)
}

// TestStdioSetsidGrandchildDiesWithoutCgroups: the same through the /proc
// fallback (parent chains and orphans re-parented to the subreaper). Not
// parallel: it turns cgroups off for the package.
func TestStdioSetsidGrandchildDiesWithoutCgroups(t *testing.T) {
	defer mcpclient.CgroupsOffForTest()()
	checkSetsidChildDies(t)
}

// TestStdioSessionCgroupRemoved: the per-session cgroup directory is gone
// after Close (none of this process's is left once its sessions closed).
func TestStdioSessionCgroupRemoved(t *testing.T) {
	c := connect(t, demoSpec())
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.Pid()) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := os.ReadFile("/proc/self/cgroup")
	if bytes.Equal(b, own) {
		t.Logf("no session cgroup on this machine (child cgroup %q)", b)
	} else if !strings.Contains(string(b), "/mcpbus-"+strconv.Itoa(os.Getpid())+"-") {
		t.Fatalf("child cgroup %q, want a session cgroup of this process", b)
	}
	dir := ""
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			dir = p
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dir, "/mcpbus-") {
		matches, _ := filepath.Glob("/sys/fs/cgroup*/" + dir)
		more, _ := filepath.Glob("/sys/fs/cgroup/*/" + dir)
		if len(matches)+len(more) > 0 {
			t.Fatalf("session cgroup %s still exists after Close", dir)
		}
	}
}

// TestStdioEmptyEnvAndRunAs: EmptyEnv gives the child Env and PWD only, and
// RunAs its uid and gid with no supplementary group; such a child cannot
// read this process's environment (/proc/<gateway>/environ).
func TestStdioEmptyEnvAndRunAs(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: its parent is private to this uid.
	out, err := os.MkdirTemp("", "mcpclient-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(out) })
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(out, "environ")
	script := `if cat /proc/` + strconv.Itoa(os.Getpid()) + `/environ > /dev/null 2>&1; then echo readable > "$1"; else echo refused > "$1"; fi; exec "$0"`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := mcpclient.Spec{Server: "demo", Command: "/bin/sh", Args: []string{"-c", script, demoBin, probe}, EmptyEnv: true, InheritEnv: true,
		Env: map[string]string{"ONLY": "1"}, Dir: out, RunAs: &mcpclient.Credential{UID: 65534, GID: 65534}, Logger: testLogger(t)}
	c, err := mcpclient.Connect(ctx, spec)
	if os.Geteuid() != 0 {
		if err == nil {
			_ = c.Close()
			t.Fatal("RunAs worked without root")
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid := whoami(t, c, nil).Pid
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimRight(string(env), "\x00"), "\x00")
	slices.Sort(got)
	if !slices.Equal(got, []string{"ONLY=1", "PWD=" + out}) {
		t.Errorf("child environment = %q, want PWD and ONLY only", got)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65534\t65534\t65534\t65534", "Gid:\t65534\t65534\t65534\t65534", "Groups:\t \n"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("child status lacks %q:\n%s", want, status)
		}
	}
	if b, err := os.ReadFile(probe); err != nil || strings.TrimSpace(string(b)) != "refused" {
		t.Errorf("the child reading the gateway's environ: %q (%v), want refused", b, err)
	}
}

// TestStaleSessionCgroupsAreSwept: a session cgroup left by a gateway that
// was killed (its pid gone) is emptied and removed when another gateway
// starts using cgroups; a live process's is left alone.
func TestStaleSessionCgroupsAreSwept(t *testing.T) {
	t.Parallel()
	base := mcpclient.CgroupBaseForTest()
	if base == "" {
		t.Log("no writable cgroup v2 with cgroup.kill here: nothing to sweep")
		return
	}
	// A pid that exited: a finished child of ours, reaped.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(base, fmt.Sprintf("mcpbus-%d-1", dead.Process.Pid))
	live := filepath.Join(base, fmt.Sprintf("mcpbus-%d-999999", os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Remove(live); _ = os.Remove(stale) })
	// A process left in the stale cgroup.
	sleeper := exec.Command("sleep", "1000")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	if err := os.WriteFile(filepath.Join(stale, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	mcpclient.SweepStaleCgroupsForTest(base)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale cgroup %s still exists (%v)", stale, err)
	}
	if err := sleeper.Wait(); err == nil {
		t.Error("the process in the stale cgroup was not killed")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's cgroup was removed: %v", err)
	}
}
