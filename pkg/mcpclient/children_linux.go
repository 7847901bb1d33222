//go:build linux

package mcpclient

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// startTime returns pid's start time (clock ticks after boot, field 22 of
// /proc/<pid>/stat): with the pid it names one process for good, whatever
// reuses the number later. ok is false when pid does not exist.
func startTime(pid int) (uint64, bool) {
	f := statFields(pid)
	if len(f) < 20 {
		return 0, false
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	return st, err == nil
}

// sameProcess reports whether pid is still the process that started at
// start.
func sameProcess(pid int, start uint64) bool {
	st, ok := startTime(pid)
	return ok && st == start
}

// selfID names this process for good: "<pid>-<start time>".
var selfID = sync.OnceValue(func() string {
	st, _ := startTime(os.Getpid())
	return fmt.Sprintf("%d-%d", os.Getpid(), st)
})

// childLog records the stdio children of this process in a file of its
// own, so the next process on the same directory can kill what this one
// left if it dies without closing its sessions (SIGKILL, OOM).
type childLog struct {
	mu       sync.Mutex
	path     string
	children map[int]childEntry // by leader pid
}

// childEntry is one recorded stdio child: the leader of its process group,
// its start time and its session cgroup ("" without one).
type childEntry struct {
	start  uint64
	cgroup string
}

// children is set once TrackChildren succeeded.
var (
	childrenMu sync.Mutex
	children   *childLog
)

// TrackChildren kills what earlier processes that recorded their stdio
// children in dir left running when they died without closing their
// sessions (a SIGKILL of the gateway: the direct children die of their
// parent-death signal, not what they started in their process group, in
// their session cgroup or, for isolated children, in their namespace), and
// from then on records this process's children there, in a file of its
// own, "<pid>-<start time>". Session cgroups of dead gateways are swept
// too. A record whose process still runs is left
// alone; a recorded process group is killed only when its leader is gone
// or is still the process recorded (same start time), so a reused pid is
// never hit. Call it once at start, before any stdio child is spawned. It
// returns how many records of dead processes it cleared.
func TrackChildren(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("cannot create the stdio children directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return 0, fmt.Errorf("cannot secure the stdio children directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("cannot read the stdio children directory: %w", err)
	}
	cleared := 0
	for _, e := range entries {
		pidText, startText, ok := strings.Cut(e.Name(), "-")
		pid, err1 := strconv.Atoi(pidText)
		start, err2 := strconv.ParseUint(startText, 10, 64)
		if !ok || errors.Join(err1, err2) != nil || e.Name() == selfID() {
			continue
		}
		if sameProcess(pid, start) {
			continue // a live process's children
		}
		path := filepath.Join(dir, e.Name())
		killRecorded(path)
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return cleared, fmt.Errorf("cannot remove a stale stdio children record: %w", err)
		}
		cleared++
	}
	// Session cgroups of dead gateways that no record names (another
	// directory, an older version): swept now, not at the first spawn.
	if base := cgroupBase(); base != "" {
		sweepStaleCgroups(base)
	}
	childrenMu.Lock()
	defer childrenMu.Unlock()
	if children == nil {
		children = &childLog{path: filepath.Join(dir, selfID()), children: map[int]childEntry{}}
	}
	return cleared, nil
}

// killRecorded kills what one dead process's record names: each session
// cgroup, and each process group whose leader is gone or is still the
// recorded process.
func killRecorded(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		if errors.Join(err1, err2) != nil || pid <= 1 {
			continue
		}
		if len(f) > 2 {
			cg := &sessionCgroup{dir: f[2], fd: -1}
			_ = cg.killAndRemove(time.Second)
		}
		if _, exists := startTime(pid); exists && !sameProcess(pid, start) {
			continue // the number names another process now
		}
		killGroup(pid)
		_ = waitGroupGone(pid, time.Second)
	}
}

// recordChild notes a started stdio child (no-op before TrackChildren).
func recordChild(pid int, cg *sessionCgroup) {
	childrenMu.Lock()
	l := children
	childrenMu.Unlock()
	if l == nil || pid <= 0 {
		return
	}
	st, _ := startTime(pid)
	e := childEntry{start: st}
	if cg != nil {
		e.cgroup = cg.dir
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.children[pid] = e
	l.write()
}

// forgetChild drops a closed stdio child from the record.
func forgetChild(pid int) {
	childrenMu.Lock()
	l := children
	childrenMu.Unlock()
	if l == nil || pid <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.children[pid]; ok {
		delete(l.children, pid)
		l.write()
	}
}

// write replaces the record with the current children, whole (a temporary
// file renamed over it), one "<pid> <start time> [cgroup]" line each.
func (l *childLog) write() {
	var sb strings.Builder
	for pid, e := range l.children {
		fmt.Fprintf(&sb, "%d %d %s\n", pid, e.start, e.cgroup)
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(sb.String()), 0o600); err != nil {
		return
	}
	_ = os.Rename(tmp, l.path)
}
