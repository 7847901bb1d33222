//go:build linux

package mcpclient

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// newSysProcAttr puts the child in its own process group, so Close can kill
// everything it started, and has the kernel kill it if the gateway dies.
// With run it switches to that uid and gid and drops supplementary groups;
// with cg the child is born in that cgroup (clone3 CLONE_INTO_CGROUP), so
// no descendant can leave it. With isolate the child is born in new PID,
// mount and IPC namespaces, still root: the shim it runs (isolatedCommand)
// switches to run itself.
func newSysProcAttr(run *Credential, isolate bool, cg *sessionCgroup) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if isolate {
		a.Cloneflags = isolationFlags
	} else if run != nil {
		a.Credential = &syscall.Credential{Uid: run.UID, Gid: run.GID, Groups: []uint32{}}
	}
	if cg != nil {
		a.UseCgroupFD, a.CgroupFD = true, cg.fd
	}
	return a
}

// killGroup SIGKILLs every process in the group.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// EnableSubreaper makes the calling process a child subreaper
// (PR_SET_CHILD_SUBREAPER): orphaned descendants, such as the grandchildren
// of a stdio server wrapped in sh -c or npx, are re-parented to it instead
// of to PID 1. Close then reaps the members of the server's process group
// itself, so none is left as a zombie even when PID 1 does not reap (a
// container without an init). Call it once at start-up, before any Connect.
// Orphans outside mcpclient's process groups (e.g. double-forked daemons)
// would also be re-parented and never reaped.
//
// Without a session cgroup (no writable cgroup v2), closing a session also
// kills every orphan re-parented here that is not a live stdio child: the
// descendants that left their process group (setsid) and whose parent
// exited.
func EnableSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	subreaper.Store(true)
	return nil
}

// subreaper is set once EnableSubreaper succeeded.
var subreaper atomic.Bool

// waitGroupGone waits until no member of the process group is running,
// re-sending SIGKILL meanwhile. Members that are zombies of this process
// (re-parented orphans, see EnableSubreaper) are reaped; the group leader is
// left to its exec.Cmd. Zombies of other parents count as gone: only their
// parent can reap them.
func waitGroupGone(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	self := os.Getpid()
	for {
		alive, err := scanGroup(pgid, self)
		if err != nil {
			// No /proc: fall back to asking the kernel about the group.
			alive = 0
			if syscall.Kill(-pgid, 0) == nil {
				alive = 1
			}
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d process(es) of group %d still running %v after SIGKILL", alive, pgid, timeout)
		}
		killGroup(pgid)
		time.Sleep(10 * time.Millisecond)
	}
}

// scanGroup counts the running members of group pgid and reaps those that
// are zombie children of self (other than the leader).
func scanGroup(pgid, self int) (alive int, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, pgrp, ok := readStat(pid)
		if !ok || pgrp != pgid {
			continue
		}
		switch state {
		case 'Z', 'X':
			if ppid == self && pid != pgid {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			}
		default:
			alive++
		}
	}
	return alive, nil
}

// readStat returns the state, parent pid and process group of pid from
// /proc/<pid>/stat.
func readStat(pid int) (state byte, ppid, pgrp int, ok bool) {
	f := statFields(pid)
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if errors.Join(err1, err2) != nil {
		return 0, 0, 0, false
	}
	return f[0][0], ppid, pgrp, true
}

// statFields returns the fields of /proc/<pid>/stat after the command name
// (state first), nil when pid does not exist. "pid (comm) state ppid pgrp
// …": comm may contain spaces and parens.
func statFields(pid int) [][]byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(b[i+1:])
}

// processRunning reports whether pid (a child of this process) is still
// running. It asks waitid(P_PID, WEXITED|WNOHANG|WNOWAIT), one syscall that
// leaves the exit status for exec.Cmd.Wait to collect; for a pid that is
// not our child it falls back to /proc (gone or a zombie means not running).
func processRunning(pid int) bool {
	const (
		pPID    = 1
		wNoHang = 0x1
		wExited = 0x4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t; si_signo (first int32) stays 0 unless the child exited
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoHang|wNoWait, 0, 0)
	if errno == 0 {
		return info[0] == 0 && info[1] == 0 && info[2] == 0 && info[3] == 0
	}
	state, _, _, ok := readStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// sysPidfdOpen is pidfd_open(2)'s number, the same on every Linux
// architecture (syscall does not name it).
const sysPidfdOpen = 434

// pidfdNonblock is PIDFD_NONBLOCK (O_NONBLOCK), so the pidfd can sit on the
// runtime's poller instead of holding a thread.
const pidfdNonblock = 0x800

// watchExit returns a channel closed once the child pid has exited (it
// does not reap it: exec.Cmd.Wait still does). A pidfd becomes readable
// when its process exits; the wait parks a goroutine on the poller, so
// watching hundreds of children costs no threads. Without pidfd support
// (Linux before 5.10) it returns nil, which never closes.
func watchExit(pid int) <-chan struct{} {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), pidfdNonblock, 0)
	if errno != 0 {
		return nil
	}
	f := os.NewFile(fd, "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		// Read waits for readability between calls; the check makes a
		// spurious wake-up wait again.
		_ = rc.Read(func(uintptr) bool { return !processRunning(pid) })
	}()
	return done
}
