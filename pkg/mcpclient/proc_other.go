//go:build !unix

package mcpclient

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// Without process groups only the direct child can be killed.
func newSysProcAttr(*Credential, bool, *sessionCgroup) *syscall.SysProcAttr { return nil }

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// EnableSubreaper is only supported on Linux.
func EnableSubreaper() error { return errors.ErrUnsupported }

func waitGroupGone(int, time.Duration) error { return nil }

func processRunning(int) bool { return true }

// watchExit is not supported here: the channel never closes.
func watchExit(int) <-chan struct{} { return nil }
