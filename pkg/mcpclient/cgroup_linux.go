//go:build linux

package mcpclient

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sessionCgroup is the cgroup v2 of one stdio session: the child is born in
// it and every descendant stays in it (a process cannot leave its cgroup
// without write access to the cgroup tree), so cgroup.kill ends them all,
// whatever process group or session they moved to.
type sessionCgroup struct {
	dir string
	fd  int // the directory, open until the child started; -1 after

	mu      sync.Mutex
	removed bool
}

// cgroupsOff disables session cgroups (tests of the /proc fallback).
var cgroupsOff atomic.Bool

// cgroupSeq numbers the session cgroups of this process.
var cgroupSeq atomic.Uint64

// cgroupBase is the cgroup v2 directory of this process, where session
// cgroups are created: "" when there is none, it is not writable or the
// kernel has no cgroup.kill (before Linux 5.14). Found once.
var cgroupBase = sync.OnceValue(func() string {
	mount := cgroup2Mount()
	own := ownCgroup()
	if mount == "" || own == "" {
		return ""
	}
	base := filepath.Join(mount, own)
	probe := filepath.Join(base, fmt.Sprintf("mcpbus-%d-probe", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return ""
	}
	defer func() { _ = os.Remove(probe) }()
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		return ""
	}
	// In the background: a spawn must not wait for the debris of other,
	// killed gateways (each stale cgroup may take up to a second).
	go sweepStaleCgroups(base)
	return base
})

// sweepStaleCgroups kills what is left in the session cgroups of gateway
// processes that no longer exist, told by pid and start time (killed
// before they could close their sessions: their stdio children died with
// them, but not descendants that left the process group) and removes those
// cgroups.
func sweepStaleCgroups(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "mcpbus-")
		if !ok || !e.IsDir() {
			continue
		}
		// mcpbus-<pid>-<start time>-<seq>, or mcpbus-<pid>-<seq> as older
		// versions named them.
		f := strings.Split(rest, "-")
		pid, err := strconv.Atoi(f[0])
		if len(f) < 2 || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if len(f) == 3 {
			if start, err := strconv.ParseUint(f[1], 10, 64); err != nil || sameProcess(pid, start) {
				continue // alive, or not ours to judge
			}
		} else if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // alive, or not ours to judge
		}
		cg := &sessionCgroup{dir: filepath.Join(base, e.Name()), fd: -1}
		_ = cg.killAndRemove(time.Second)
	}
}

// cgroup2Mount returns the mount point of the cgroup v2 hierarchy, "" when
// none is mounted.
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "id parent maj:min root mountpoint opts ... - fstype source opts"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if f := strings.Fields(pre); len(f) >= 5 {
			return f[4]
		}
	}
	return ""
}

// ownCgroup returns this process's cgroup v2 path ("0::<path>").
func ownCgroup() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") && !strings.Contains(p, "..") {
			return p
		}
	}
	return ""
}

// newSessionCgroup creates a session cgroup, or returns nil when the system
// has none for us (the caller then falls back to process groups and /proc).
func newSessionCgroup(log *slog.Logger) *sessionCgroup {
	if cgroupsOff.Load() {
		return nil
	}
	base := cgroupBase()
	if base == "" {
		return nil
	}
	dir := filepath.Join(base, fmt.Sprintf("mcpbus-%s-%d", selfID(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		log.Warn("cannot create a session cgroup; descendants are tracked through /proc", "error", err)
		return nil
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		log.Warn("cannot open a session cgroup; descendants are tracked through /proc", "error", err)
		return nil
	}
	return &sessionCgroup{dir: dir, fd: fd}
}

// started closes the directory once the child is in the cgroup.
func (cg *sessionCgroup) started() {
	if cg == nil {
		return
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.fd >= 0 {
		_ = syscall.Close(cg.fd)
		cg.fd = -1
	}
}

// kill writes cgroup.kill: SIGKILL to every process of the cgroup.
func (cg *sessionCgroup) kill() {
	if cg == nil {
		return
	}
	_ = os.WriteFile(filepath.Join(cg.dir, "cgroup.kill"), []byte("1"), 0)
}

// killAndRemove kills every process of the cgroup, reaps those that are
// zombie children of this process (orphans re-parented to a subreaper;
// stdio children are left to their exec.Cmd), waits until the cgroup is
// empty and removes it.
func (cg *sessionCgroup) killAndRemove(timeout time.Duration) error {
	if cg == nil {
		return nil
	}
	cg.started()
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.removed {
		return nil
	}
	deadline := time.Now().Add(timeout)
	victims := map[int]bool{}
	for {
		for _, pid := range cg.procs() {
			victims[pid] = true
		}
		cg.kill()
		reapVictims(victims)
		err := os.Remove(cg.dir)
		if err != nil && errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		if err == nil {
			cg.removed = true
		}
		if cg.removed && len(victims) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("session cgroup still busy %v after cgroup.kill: %w", timeout, err)
			}
			return fmt.Errorf("%d killed process(es) of the session not reaped after %v", len(victims), timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procs lists the pids of the cgroup.
func (cg *sessionCgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for f := range bytes.FieldsSeq(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// reapVictims forgets the killed pids that are gone, reaps those that are
// zombie children of this process (other than stdio children, which their
// exec.Cmd reaps) and keeps those still running.
func reapVictims(victims map[int]bool) {
	self := os.Getpid()
	for pid := range victims {
		state, ppid, _, ok := readStat(pid)
		switch {
		case !ok:
			delete(victims, pid)
		case state != 'Z' && state != 'X':
			// still dying
		case ppid == self && !leaders.has(pid):
			var ws syscall.WaitStatus
			if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got == pid || err != nil {
				delete(victims, pid)
			}
		default:
			delete(victims, pid) // a zombie of another parent, or a stdio child
		}
	}
}

// killTree is the fallback without a session cgroup: it SIGKILLs the
// descendants of leader found through their parent chains in /proc (those
// that left the process group included) and, when this process is a
// subreaper, the orphans re-parented to it that are not live stdio
// children, until none of them runs; their zombies are reaped.
func killTree(leader int) {
	self := os.Getpid()
	deadline := time.Now().Add(groupWaitTimeout)
	victims := map[int]bool{}
	for {
		for _, pid := range treeOf(leader, self) {
			victims[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		reapVictims(victims)
		if len(victims) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// treeOf returns the running descendants of leader and, with a subreaper,
// the running orphans of self that are not stdio children.
func treeOf(leader, self int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	running := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, _, ok := readStat(pid)
		if !ok {
			continue
		}
		parent[pid] = ppid
		running[pid] = state != 'Z' && state != 'X'
	}
	orphans := subreaper.Load() && startsInFlight.Load() == 0
	var out []int
	for pid := range parent {
		if pid == leader || !running[pid] {
			continue
		}
		if orphans && parent[pid] == self && !leaders.has(pid) {
			out = append(out, pid)
			continue
		}
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == leader {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
