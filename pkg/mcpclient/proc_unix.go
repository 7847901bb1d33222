//go:build unix && !linux

package mcpclient

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

func newSysProcAttr(run *Credential, _ bool, _ *sessionCgroup) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if run != nil {
		a.Credential = &syscall.Credential{Uid: run.UID, Gid: run.GID, Groups: []uint32{}}
	}
	return a
}

func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// EnableSubreaper is only supported on Linux.
func EnableSubreaper() error {
	return errors.ErrUnsupported
}

// waitGroupGone waits until the kernel no longer knows the group. Zombies of
// other parents keep it known, so this may time out where Linux would not.
func waitGroupGone(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still exists %v after SIGKILL", pgid, timeout)
		}
		killGroup(pgid)
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// processRunning reports whether pid exists (a zombie counts as running).
func processRunning(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// watchExit is not supported here: the channel never closes.
func watchExit(int) <-chan struct{} { return nil }
