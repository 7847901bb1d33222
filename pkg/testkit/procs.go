package testkit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// SharedTempDir returns a new temporary directory, removed when the test
// ends, that other uids can search (mode 0755): t.TempDir's parent is
// private to this uid, which children running under another uid cannot
// pass.
func SharedTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcpbus-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// SharedExecutable copies the executable src into dir (see SharedTempDir)
// as name, runnable by any uid, and returns its path.
func SharedExecutable(t testing.TB, dir, name, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	// Written holding syscall.ForkLock for reading, as its doc asks of
	// whoever creates a file descriptor: a parallel test's fork would
	// otherwise copy the write descriptor into its child until that child
	// execs, and running dst meanwhile fails with "text file busy".
	syscall.ForkLock.RLock()
	err = os.WriteFile(dst, data, 0o755)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// RunningWith returns the pid of a running process (not a zombie) other
// than this one whose command line contains marker, or 0.
func RunningWith(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(cmdline), marker) && RunningSince(pid) != "" {
			return pid
		}
	}
	return 0
}

// RunningSince returns pid's start time (field 22 of /proc/<pid>/stat)
// while it runs, "" once it is gone or a zombie: with the pid it names one
// process, whatever reuses the number later.
func RunningSince(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}
