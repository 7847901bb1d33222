//go:build unix

package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func demoSpec() mcpclient.Spec {
	return mcpclient.Spec{Server: "demo", Transport: mcpclient.TransportStdio, Command: demoBin, InheritEnv: true}
}

// waitGone polls, with a deadline, until pid (or, negative, the process
// group) no longer exists.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still exists (kill 0: %v)", pid, err)
		}
		<-tick.C
	}
}

func readPidFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

func TestStdioListAndCall(t *testing.T) {
	t.Parallel()
	c := connect(t, demoSpec())

	// The demo server speaks both eras by default: the probe picks modern.
	if info := c.ServerInfo(); info.Name != "demo" || info.Era != mcpclient.EraModern || info.ProtocolVersion != mcpclient.ModernProtocolVersion {
		t.Errorf("ServerInfo = %+v, want demo speaking %s", info, mcpclient.ModernProtocolVersion)
	}
	if c.Pid() <= 0 {
		t.Errorf("Pid() = %d", c.Pid())
	}

	tools := listTools(t, c)
	want := demoTools
	got := toolNames(tools)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	weather := findTool(t, tools, "weather")
	if weather.OutputSchema == nil || weather.InputSchema == nil || weather.Annotations == nil || weather.Raw == nil {
		t.Errorf("weather tool lacks raw parts: %+v", weather)
	}
	if !json.Valid(weather.OutputSchema) || !strings.Contains(string(weather.OutputSchema), `"temperature_c"`) {
		t.Errorf("weather output schema = %s", weather.OutputSchema)
	}

	if got := text(t, call(t, c, "echo", `{"message":"hello, world"}`, nil)); got != "hello, world" {
		t.Errorf("echo = %q", got)
	}
	if got := string(call(t, c, "echo", `{"message":"x"}`, nil).Content[0]); got != `{"type":"text","text":"x"}` {
		t.Errorf("echo content block = %s", got)
	}

	add := call(t, c, "add", `{"a":2,"b":3}`, nil)
	if got := text(t, add); got != "5" {
		t.Errorf("add text = %q", got)
	}
	if got := string(add.StructuredContent); got != `{"sum":5}` {
		t.Errorf("add structured = %s", got)
	}

	// The server's field order (not alphabetical) survives: the bytes pass
	// through untouched.
	w := call(t, c, "weather", `{"city":"Paris"}`, nil)
	if got, want := string(w.StructuredContent), `{"city":"Paris","temperature_c":21,"conditions":"sunny"}`; got != want {
		t.Errorf("weather structured = %s, want %s", got, want)
	}
	if w.IsError {
		t.Errorf("weather IsError")
	}

	f := call(t, c, "fail", `{"message":"boom"}`, nil)
	if !f.IsError || text(t, f) != "boom" {
		t.Errorf("fail = %+v", f)
	}

	if id := whoami(t, c, map[string]string{"X-Ignored": "stdio has no headers"}); len(id.Headers) != 0 || id.Pid != c.Pid() {
		t.Errorf("whoami over stdio = %+v (pid %d)", id, c.Pid())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "no_such_tool", nil, nil)
	if err == nil || !strings.Contains(err.Error(), `mcp server "demo"`) {
		t.Errorf("unknown tool: err = %v, want an error naming the server", err)
	}
}

func TestStdioDirEnvAndRelativeCommand(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, demoBin)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rel, "/") {
		rel = "./" + rel
	}
	dir := t.TempDir()
	tmp := t.TempDir()
	c := connect(t, mcpclient.Spec{
		Server:  "demo",
		Command: rel, // relative to our cwd, not to Dir
		Dir:     dir,
		Env:     map[string]string{"TMPDIR": tmp, "DEMO_MARKER": "1"},
	})
	id := whoami(t, c, nil)
	if got, want := evalSymlinks(t, id.Cwd), evalSymlinks(t, dir); got != want {
		t.Errorf("child cwd = %q, want %q", got, want)
	}
	if id.TmpDir != tmp {
		t.Errorf("child TMPDIR = %q, want %q", id.TmpDir, tmp)
	}
	checkMinimalEnv(t, c.Pid(), map[string]bool{"TMPDIR": true, "DEMO_MARKER": true, "PWD": true})
}

func TestStdioCommandFromEnvPath(t *testing.T) {
	t.Parallel()
	// A bare command name is looked up in Spec.Env's PATH, as the child
	// would, not only in ours.
	c := connect(t, mcpclient.Spec{
		Server:  "demo",
		Command: filepath.Base(demoBin),
		Env:     map[string]string{"PATH": "/nonexistent" + string(filepath.ListSeparator) + filepath.Dir(demoBin)},
	})
	if got := text(t, call(t, c, "echo", `{"message":"found"}`, nil)); got != "found" {
		t.Errorf("echo = %q", got)
	}
}

func evalSymlinks(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("EvalSymlinks(%q): %v", p, err)
	}
	return r
}

func TestStdioCallDeadline(t *testing.T) {
	t.Parallel()
	c := connect(t, demoSpec())

	// The tool takes 60 s: only the 200 ms deadline ends the call with an
	// error.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.CallTool(ctx, "slow", json.RawMessage(`{"seconds":60}`), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), `mcp server "demo"`) {
		t.Errorf("err = %v, want the server named", err)
	}
	// Still usable.
	if got := text(t, call(t, c, "echo", `{"message":"still here"}`, nil)); got != "still here" {
		t.Errorf("echo after deadline = %q", got)
	}
	if got := text(t, call(t, c, "slow", `{"seconds":0}`, nil)); got != "done after 0s" {
		t.Errorf("slow 0 = %q", got)
	}
}

func TestStdioCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "demo", Command: demoBin, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGone(t, pid)
	waitGone(t, -pid)
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"x"}`), nil); !errors.Is(err, mcpclient.ErrClosed) {
		t.Errorf("CallTool after Close: %v, want ErrClosed", err)
	}
	if _, err := c.ListTools(ctx); !errors.Is(err, mcpclient.ErrClosed) {
		t.Errorf("ListTools after Close: %v, want ErrClosed", err)
	}
}

func TestStdioChildDies(t *testing.T) {
	t.Parallel()
	c := connect(t, demoSpec())
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"anyone?"}`), nil)
	if !errors.Is(err, mcpclient.ErrConnectionLost) {
		t.Fatalf("CallTool to a dead child: err = %v, want ErrConnectionLost", err)
	}
	t.Log(err)
}

func TestStdioShellWrapperLeavesNoGrandchild(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	// sh starts a background sleep (which ignores stdin closing) and then
	// the demo server as its own child: both are grandchildren of ours.
	script := `sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$1"; "$0"; exit $?`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, mcpclient.Spec{
		Server: "wrapped", Command: "sh", Args: []string{"-c", script, demoBin, pidFile},
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	shPid := c.Pid()
	sleepPid := readPidFile(t, pidFile)
	serverPid := whoami(t, c, nil).Pid
	if serverPid == shPid {
		t.Logf("sh exec'd the server; the sleep is still a grandchild")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range []int{shPid, serverPid, sleepPid, -shPid} {
		waitGone(t, pid)
	}
}

func TestConnectHungServer(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "hung.pid")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// The server never answers nor exits: only the deadline ends Connect.
	connected := make(chan error, 1)
	go func() {
		c, err := mcpclient.Connect(ctx, mcpclient.Spec{
			Server: "hung", Command: "sh", Args: []string{"-c", `echo $$ > "$0"; exec sleep 3600`, pidFile},
			Logger: testLogger(t),
		})
		if err == nil {
			c.Close()
		}
		connected <- err
	}()
	err := testkit.Receive(t, 60*time.Second, "Connect to return after its 300ms deadline", connected)
	if err == nil {
		t.Fatal("Connect to a server that never answers succeeded")
	}
	t.Log(err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), `mcp server "hung"`) {
		t.Errorf("err = %v, want the server named", err)
	}
	pid := readPidFile(t, pidFile)
	waitGone(t, pid)
	waitGone(t, -pid)
}

func TestConnectStdioErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, spec := range map[string]mcpclient.Spec{
		"missing binary": {Server: "x", Command: "/nonexistent/mcp-server"},
		"exits at once":  {Server: "x", Command: "sh", Args: []string{"-c", "echo fatal >&2; exit 3"}},
		"no command":     {Server: "x"},
		"no server name": {Command: demoBin},
		"bad transport":  {Server: "x", Transport: "carrier-pigeon"},
	} {
		t.Run(name, func(t *testing.T) {
			spec.Logger = testLogger(t)
			c, err := mcpclient.Connect(ctx, spec)
			if err == nil {
				c.Close()
				t.Fatal("Connect succeeded")
			}
			t.Log(err)
		})
	}
}

func TestStdioStderr(t *testing.T) {
	t.Parallel()
	script := `echo "starting up" >&2; exec "$0"`
	c := connect(t, mcpclient.Spec{Server: "noisy", Command: "sh", Args: []string{"-c", script, demoBin}})
	// The line was written before the server answered initialize, but the
	// drain is asynchronous: poll for it.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(c.Stderr(), "starting up") {
		if time.Now().After(deadline) {
			t.Fatalf("Stderr() = %q", c.Stderr())
		}
		<-tick.C
	}
}

func TestInteropServerEverything(t *testing.T) {
	t.Parallel()
	c := connect(t, mcpclient.Spec{
		Server:     "everything",
		Command:    "node",
		Args:       []string{testkit.Everything(t), "stdio"},
		InheritEnv: true,
	})
	tools := listTools(t, c)
	echo := findTool(t, tools, "echo")
	if !strings.Contains(string(echo.InputSchema), `"message"`) {
		t.Errorf("echo input schema = %s", echo.InputSchema)
	}
	if got := text(t, call(t, c, "echo", `{"message":"hi from mcpbus"}`, nil)); got != "Echo: hi from mcpbus" {
		t.Errorf("echo = %q", got)
	}
	pid := c.Pid()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGone(t, pid)
	waitGone(t, -pid)
}
