//go:build linux

package mcpclient

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// isolatedArg0 is the argv[0] under which this binary, re-executed by
// isolatedCommand, acts as the isolated child's first process instead of
// running its main.
const isolatedArg0 = "mcpbus-isolated-child"

// isolatedProbe is the mode of the shim that only sets up the namespaces
// and exits (IsolationUnavailable).
const isolatedProbe = "probe"

// isolationFlags are the namespaces of an isolated child: its own PID
// namespace (it sees only its own descendants, and all of them die with
// it), the mount namespace that gives it its own /proc, and its own System
// V IPC.
const isolationFlags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC

func init() {
	if len(os.Args) < 2 || os.Args[0] != isolatedArg0 {
		return
	}
	err := runIsolated(os.Args[1:])
	fmt.Fprintf(os.Stderr, "mcpbus: cannot start the isolated stdio server: %v\n", err)
	os.Exit(127)
}

// runIsolated is the shim, PID 1 of the new namespaces, still root: it
// keeps its mounts private, mounts a /proc of its own PID namespace, drops
// to the child's uid and gid with no supplementary group, asks again for
// SIGKILL when the gateway dies (a credential change clears it) and execs
// the server. args is "probe", or uid, gid, the command's absolute path and
// its arguments.
func runIsolated(args []string) error {
	// Pdeathsig is per thread: set it on the thread that execs.
	runtime.LockOSThread()
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if args[0] == isolatedProbe {
		os.Exit(0)
	}
	if len(args) < 3 {
		return errors.New("usage: uid gid command [args...]")
	}
	uid, err1 := strconv.ParseUint(args[0], 10, 32)
	gid, err2 := strconv.ParseUint(args[1], 10, 32)
	if errors.Join(err1, err2) != nil || uid == 0 || gid == 0 {
		return fmt.Errorf("invalid uid:gid %q:%q", args[0], args[1])
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop supplementary groups: %w", err)
	}
	if err := syscall.Setgid(int(gid)); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(int(uid)); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", errno)
	}
	return syscall.Exec(args[2], args[2:], os.Environ())
}

// isolatedCommand returns the command line that runs command under run in
// new namespaces: this binary, re-executed as the shim.
func isolatedCommand(run *Credential, command string, args []string) (string, []string) {
	argv := append([]string{isolatedArg0, strconv.FormatUint(uint64(run.UID), 10), strconv.FormatUint(uint64(run.GID), 10), command}, args...)
	return "/proc/self/exe", argv
}

// IsolationUnavailable returns why [Spec.Isolate] cannot be had here, or
// nil: it needs root (to mount the child's /proc and to switch uids) and
// PID and mount namespaces, which it tries once, by starting the shim in
// probe mode. The answer is kept for the life of the process.
func IsolationUnavailable() error { return isolationProbe() }

var isolationProbe = sync.OnceValue(func() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("mcpbus runs as uid %d, not root: it cannot give each child a uid of its own and a PID namespace", os.Geteuid())
	}
	path, argv := "/proc/self/exe", []string{isolatedArg0, isolatedProbe}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: []string{}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: isolationFlags, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if msg := bytes.TrimSpace(stderr.Bytes()); len(msg) > 0 {
			return fmt.Errorf("cannot create PID and mount namespaces: %s", msg)
		}
		return fmt.Errorf("cannot create PID and mount namespaces: %w", err)
	}
	return nil
})
