package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// minimalEnv lists the variables a stdio child inherits when
// Spec.InheritEnv is false.
var minimalEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"LANG", "LC_ALL", "LC_CTYPE", "TZ",
	"TMPDIR", "TMP", "TEMP",
	"SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", // Windows needs these to run anything
}

// stderrWaitDelay is how long Wait waits for stderr to close after the
// child exited (exec.Cmd.WaitDelay).
const stderrWaitDelay = time.Second

// groupWaitTimeout bounds how long Close waits for a killed process group
// to disappear.
const groupWaitTimeout = 5 * time.Second

func (c *Client) newStdioTransport(spec Spec) (transport.Interface, error) {
	command, err := resolveCommand(spec.Command, spec.Env["PATH"])
	if err != nil {
		return nil, err
	}
	dir := spec.Dir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
	}
	env := buildEnv(spec.InheritEnv && !spec.EmptyEnv, spec.EmptyEnv, spec.Env, dir)
	if spec.Isolate {
		if spec.RunAs == nil || spec.RunAs.UID == 0 || spec.RunAs.GID == 0 {
			return nil, errors.New("an isolated stdio child needs an unprivileged RunAs uid and gid")
		}
		if err := IsolationUnavailable(); err != nil {
			return nil, fmt.Errorf("an isolated stdio child cannot be started: %w", err)
		}
	}

	c.proc = &process{}
	c.stderr = newStderrSink(c.logger, c.redactor)
	cmdFunc := func(_ context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
		// exec.Command, not CommandContext: the child's life is ours to end.
		cmd := exec.Command(command, args...)
		if spec.Isolate {
			// The shim runs first, as root in the new namespaces, and
			// execs command under RunAs.
			cmd.Path, cmd.Args = isolatedCommand(spec.RunAs, command, args)
		}
		cmd.Dir = dir
		cmd.Env = env
		// A session cgroup, where the system has one for us, holds every
		// descendant, whatever process group or session it moves to.
		c.proc.cg = newSessionCgroup(c.logger)
		startsInFlight.Add(1)
		cmd.SysProcAttr = newSysProcAttr(spec.RunAs, spec.Isolate, c.proc.cg)
		// exec copies stderr into the sink and Wait waits for the copy, so
		// a child that prints why it fails and exits at once is heard
		// (mcp-go's own pipe is closed on exit, dropping what was unread).
		// WaitDelay bounds the wait when a grandchild keeps stderr open.
		cmd.Stderr = c.stderr
		cmd.WaitDelay = stderrWaitDelay
		c.proc.set(cmd)
		return cmd, nil
	}
	return c.newPipedStdio(command, spec.Args, cmdFunc)
}

// resolveCommand makes a relative path containing a separator absolute
// against the current directory: exec would otherwise resolve it against
// cmd.Dir. A bare name is looked up in envPath when Spec.Env sets PATH (as
// the child would), else in the gateway's PATH.
func resolveCommand(command, envPath string) (string, error) {
	if filepath.IsAbs(command) {
		return command, nil
	}
	if strings.ContainsRune(command, '/') || strings.ContainsRune(command, filepath.Separator) {
		abs, err := filepath.Abs(command)
		if err != nil {
			return "", fmt.Errorf("resolving command: %w", err)
		}
		return abs, nil
	}
	path, err := lookPath(command, envPath)
	if err != nil {
		return "", fmt.Errorf("command %q: %w", command, err)
	}
	if !filepath.IsAbs(path) {
		// Found through a relative PATH entry: pin it to the current
		// directory too.
		if path, err = filepath.Abs(path); err != nil {
			return "", fmt.Errorf("resolving command: %w", err)
		}
	}
	return path, nil
}

// lookPath is exec.LookPath over envPath instead of $PATH when envPath is
// set.
func lookPath(name, envPath string) (string, error) {
	if envPath == "" || runtime.GOOS == "windows" {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(envPath) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in Spec.Env PATH", exec.ErrNotFound)
}

// buildEnv returns the child's environment: os.Environ(), nothing (empty)
// or the minimal set, then PWD=dir when dir is set, then extra (sorted, so
// the result is deterministic). Later entries win in exec.
func buildEnv(inherit, empty bool, extra map[string]string, dir string) []string {
	var env []string
	switch {
	case empty:
	case inherit:
		env = os.Environ()
	default:
		for _, k := range minimalEnv {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	if dir != "" {
		env = append(env, "PWD="+dir)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// process tracks the stdio child.
type process struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	started int            // pid, once Start has returned
	cg      *sessionCgroup // nil without cgroup v2 (then descendants are tracked by /proc)
	counted bool           // startsInFlight was decremented for cmd
}

// set records the command mcp-go is about to start.
func (p *process) set(cmd *exec.Cmd) {
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
}

// markStarted records the child's pid. It must be called after the
// transport's Start returned: cmd.Process is written by cmd.Start.
func (p *process) markStarted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		p.started = p.cmd.Process.Pid
		leaders.add(p.started)
		recordChild(p.started, p.cg)
	}
	if p.cmd != nil && !p.counted {
		p.counted = true
		startsInFlight.Add(-1)
	}
	p.cg.started()
}

// pid returns the child's pid once started, else 0.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// kill SIGKILLs the child's process group and cgroup at once (aborted
// setup).
func (p *process) kill() {
	if pid := p.pid(); pid > 0 {
		killGroup(pid)
	}
	p.cg.kill()
}

// terminate kills every descendant of the child after mcp-go's Close and
// waits until none is running: the session cgroup when there is one, else
// the process group, the descendants found by their parent chains, and the
// orphans re-parented to this process (see EnableSubreaper). The cgroup is
// removed.
func (p *process) terminate() error {
	pid := p.pid()
	if pid > 0 {
		defer leaders.remove(pid)
		defer forgetChild(pid)
	}
	if p.cg != nil {
		if pid > 0 {
			killGroup(pid)
		}
		return errors.Join(p.cg.killAndRemove(groupWaitTimeout), waitGroupGone(pid, groupWaitTimeout))
	}
	if pid <= 0 {
		return nil
	}
	killTree(pid)
	killGroup(pid)
	return waitGroupGone(pid, groupWaitTimeout)
}

// startsInFlight counts the stdio children being started: until one is in
// leaders it is indistinguishable from an escaped orphan, so the /proc
// fallback leaves orphans alone meanwhile.
var startsInFlight atomic.Int32

// leaders are the pids of the stdio children this process started and has
// not closed: an orphan re-parented here that is none of them escaped a
// session.
var leaders = pidSet{m: map[int]bool{}}

type pidSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (s *pidSet) add(pid int)    { s.mu.Lock(); s.m[pid] = true; s.mu.Unlock() }
func (s *pidSet) remove(pid int) { s.mu.Lock(); delete(s.m, pid); s.mu.Unlock() }
func (s *pidSet) has(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[pid]
}
