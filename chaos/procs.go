package chaos

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tailBuffer keeps the last max bytes written to it: the output of a child
// that may run for the whole soak.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Proc is a child process the harness starts, kills and starts again with
// the same command line.
type Proc struct {
	Name string
	Bin  string
	Args []string
	Dir  string
	Env  []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  *tailBuffer
	// Starts counts Start calls.
	Starts int
}

// Start runs the process; it is an error to start a running one.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isDone(p.done) {
		return fmt.Errorf("%s is already running", p.Name)
	}
	if p.out == nil {
		p.out = &tailBuffer{max: 256 << 10}
	}
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	var out io.Writer = p.out
	var logFile *os.File
	if dir := os.Getenv("MCPBUS_CHAOS_LOG_DIR"); dir != "" {
		// Every start's whole output, kept for reading after the run.
		f, err := os.OpenFile(filepath.Join(dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("log file of %s: %w", p.Name, err)
		}
		logFile, out = f, io.MultiWriter(p.out, f)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own: a stray signal to the test's group does
	// not reach it, and Kill can take the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	fmt.Fprintf(out, "--- start %d ---\n", p.Starts+1)
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			_ = logFile.Close()
		}
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		if logFile != nil {
			_ = logFile.Close()
		}
		close(done)
	}()
	p.cmd, p.done = cmd, done
	p.Starts++
	return nil
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isDone(p.done)
}

// Pid is the current process's id (0 before the first start).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Kill sends SIGKILL to the process (only it, not its group: its children
// must go by themselves) and waits for it to exit.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isDone(done) {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM and waits up to timeout for the exit, then SIGKILLs
// the group. It reports whether the process stopped on SIGTERM.
func (p *Proc) Stop(timeout time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isDone(done) {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return false
	}
}

// Output is the tail of the process's stdout and stderr over all its starts.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out == nil {
		return ""
	}
	return p.out.String()
}

// ProcStat is what /proc says about one process.
type ProcStat struct {
	Threads  int
	FDs      int
	Children int
	RSSKB    int
}

// readProcStat reads /proc/<pid>; ok is false when the process is gone.
func readProcStat(pid int, children map[int]int) (ProcStat, bool) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStat{}, false
	}
	var s ProcStat
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "Threads":
			s.Threads = n
		case "VmRSS":
			s.RSSKB = n
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return ProcStat{}, false
	}
	s.FDs = len(fds)
	s.Children = children[pid]
	return s, true
}

// procEntry is one live (non-zombie) process of the machine.
type procEntry struct {
	pid, ppid int
	exe       string
}

// scanProcs lists every live process with its parent and executable.
func scanProcs() []procEntry {
	var out []procEntry
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		out = append(out, procEntry{pid: pid, ppid: ppid, exe: exe})
	}
	return out
}

// childCounts maps a pid to its number of live children.
func childCounts(procs []procEntry) map[int]int {
	m := map[int]int{}
	for _, p := range procs {
		m[p.ppid]++
	}
	return m
}

// strays lists the live processes running one of bins that are not
// descendants of this test process: children left behind by a killed or
// stopped parent (re-parented to init).
func strays(bins []string) []string {
	procs := scanProcs()
	parent := map[int]int{}
	for _, p := range procs {
		parent[p.pid] = p.ppid
	}
	self := os.Getpid()
	var out []string
	for _, p := range procs {
		if !contains(bins, p.exe) {
			continue
		}
		ours := false
		for q, n := p.ppid, 0; q > 1 && n < 64; q, n = parent[q], n+1 {
			if q == self {
				ours = true
				break
			}
		}
		if !ours {
			out = append(out, fmt.Sprintf("%d (%s, parent %d)", p.pid, filepath.Base(p.exe), p.ppid))
		}
	}
	return out
}

// running lists the live processes running one of bins, strays or not.
func running(bins []string) []int {
	var out []int
	for _, p := range scanProcs() {
		if contains(bins, p.exe) {
			out = append(out, p.pid)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// selfFDs is the number of open files this test process keeps: the
// fewest of a few samples 50 ms apart, so a descriptor another goroutine
// holds for a moment (a reconnect's dial, a /proc read, a database check)
// is not counted, while one left behind is in every sample.
func selfFDs() int {
	least := -1
	for i := range 5 {
		if i > 0 {
			time.Sleep(50 * time.Millisecond) // spacing the samples, not synchronisation
		}
		fds, _ := os.ReadDir("/proc/self/fd")
		if least < 0 || len(fds) < least {
			least = len(fds)
		}
	}
	return least
}
