package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

func TestStdioCallsArePooledPerThread(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))

	r := e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if got := text(t, r); got != "hi" || r.Server != "fake" || r.Tool != "fake_echo" || r.IsError {
		t.Fatalf("reply = %+v (text %q)", r, got)
	}

	a1 := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "alice", ThreadID: "t1"}))
	a2 := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "alice", ThreadID: "t1"}))
	b1 := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "alice", ThreadID: "t2"}))
	c1 := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "bob", ThreadID: "t1"}))
	if a1.Pid == 0 || a1.Pid != a2.Pid {
		t.Errorf("same thread used two processes: %d, %d", a1.Pid, a2.Pid)
	}
	if b1.Pid == a1.Pid || c1.Pid == a1.Pid || b1.Pid == c1.Pid {
		t.Errorf("scopes share processes: alice:t1 %d, alice:t2 %d, bob:t1 %d", a1.Pid, b1.Pid, c1.Pid)
	}
	// One process per scope: default, alice:t1, alice:t2, bob:t1.
	if n := countMethod(readRecords(t, rec), "initialize"); n != 4 {
		t.Errorf("initialize requests = %d, want 4", n)
	}
	wantDir := filepath.Join(e.workspace, "users", "alice", "threads", "t1", "user-data", "workspace")
	if a1.Cwd != wantDir {
		t.Errorf("cwd = %q, want %q", a1.Cwd, wantDir)
	}
	wantTmp := filepath.Join(wantDir, ".mcp", "tmp")
	for _, k := range []string{"TMPDIR", "TMP", "TEMP"} {
		if a1.Env[k] != wantTmp {
			t.Errorf("%s = %q, want %q", k, a1.Env[k], wantTmp)
		}
	}
	if st, err := os.Stat(wantTmp); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("temp dir %s: %v, want mode 0700", wantTmp, err)
	}

	// Shutdown closes every session: no child process is left.
	e.stop()
	for _, pid := range []int{a1.Pid, b1.Pid, c1.Pid} {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool { return gone(pid) })
	}
}

func TestConcurrentFirstCallsShareOneProcess(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	const n = 16
	pids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := e.call(t, bus.Call{Tool: "fake_whoami", UserID: "u", ThreadID: "t"})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			pids[i] = who(t, r).Pid
		})
	}
	wg.Wait()
	for i := range pids {
		if pids[i] != pids[0] {
			t.Fatalf("pids differ: %v", pids)
		}
	}
	if got := countMethod(readRecords(t, rec), "initialize"); got != 1 {
		t.Errorf("initialize requests = %d, want 1", got)
	}
}

func TestPoolEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), maxSessions: 2})
	pid := func(thread string) int {
		return who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: thread})).Pid
	}
	p1, p2 := pid("t1"), pid("t2")
	if again := pid("t1"); again != p1 { // t1 is now the most recently used
		t.Fatalf("t1 moved from %d to %d", p1, again)
	}
	p3 := pid("t3") // evicts t2, the least recently used
	testkit.Eventually(t, 10*time.Second, "the evicted t2 process to be gone", func() bool { return gone(p2) })
	if gone(p1) || gone(p3) {
		t.Fatalf("a live session's process is gone: t1 %d %v, t3 %d %v", p1, gone(p1), p3, gone(p3))
	}
	if again := pid("t1"); again != p1 {
		t.Errorf("t1 was not kept: %d then %d", p1, again)
	}
	if again := pid("t2"); again == p2 {
		t.Errorf("evicted t2 kept its process %d", p2)
	}
}

// Evicting a session that has a call in flight lets the call finish: the
// session leaves the pool at once (the next call of its thread starts a
// new process) and is closed when the call returns.
func TestEvictionLetsTheCallInFlightFinish(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), maxSessions: 1})
	pidA := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "a"})).Pid
	fifo := newFifo(t)
	blocked := make(chan error, 1)
	go func() {
		r, err := e.call(t, bus.Call{Tool: "fake_block", ThreadID: "a", Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, fifo))})
		if err == nil && text(t, r) != "released" {
			err = fmt.Errorf("block answered %q", text(t, r))
		}
		blocked <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the block call to reach the server", func() bool {
		return slices.ContainsFunc(readRecords(t, rec), func(r record) bool { return r.Tool == "block" })
	})
	pidB := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "b"})).Pid // evicts a
	if gone(pidA) {
		t.Fatal("eviction killed the process of a call in flight")
	}
	releaseFifo(t, fifo) // the call in flight ends only now, after the eviction
	if err := testkit.Receive(t, 30*time.Second, "the call in flight on the evicted session to return", blocked); err != nil {
		t.Fatalf("the call in flight on the evicted session: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the evicted process to be closed after its call", func() bool { return gone(pidA) })
	if gone(pidB) {
		t.Error("the live session's process is gone")
	}
}

// TestOneUserCannotEvictAnothersSessions: issue 11 item 9. A user who
// cycles thread ids retires only their own stdio sessions once past
// stdio_pool.max_sessions_per_user; another user's session (and process)
// survives, although the pool as a whole has room for only four.
func TestOneUserCannotEvictAnothersSessions(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), maxSessions: 4, maxPerUser: 2})
	bob := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "bob", ThreadID: "b"})).Pid
	var mallory []int
	for i := range 8 {
		mallory = append(mallory, who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "mallory", ThreadID: fmt.Sprintf("m%d", i)})).Pid)
	}
	for _, pid := range mallory[:6] {
		testkit.Eventually(t, 10*time.Second, "mallory's retired sessions to be closed", func() bool { return gone(pid) })
	}
	for _, pid := range mallory[6:] {
		if gone(pid) {
			t.Errorf("mallory's two newest sessions should be kept; %d is gone", pid)
		}
	}
	if gone(bob) {
		t.Fatal("another user's thread cycling evicted bob's stdio process")
	}
	if again := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "bob", ThreadID: "b"})).Pid; again != bob {
		t.Fatalf("bob's session was replaced: pid %d, want %d", again, bob)
	}
}

func TestCrashedProcessIsReplacedOnTheNextCall(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	first := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid

	// Crashing during a call fails that call as upstream_error naming the server.
	_, err := e.call(t, bus.Call{Tool: "fake_crash"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUpstreamError || !strings.Contains(be.Message, "'fake'") {
		t.Fatalf("crash: err = %v, want upstream_error naming the server", err)
	}
	second := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid
	if second == first {
		t.Fatal("the crashed process was reused")
	}

	// A process that dies between calls is replaced before the next call,
	// which succeeds.
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Waitable, not just a zombie leader: a Go child's other threads may
	// still be exiting when /proc already says Z.
	testkit.Eventually(t, 10*time.Second, "the killed process to die", func() bool { return exited(second) })
	third := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid
	if third == second || third == 0 {
		t.Errorf("pid after kill = %d (killed %d)", third, second)
	}
}

func TestClosingSessionsKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry, "other": entry}, ""), append(fakeTools("fake"), fakeTools("other")...))
	spawn := func(server, thread string) (int, int) {
		r := e.mustCall(t, bus.Call{Tool: server + "_spawn", ThreadID: thread})
		var out struct{ Pid int }
		if err := json.Unmarshal(r.StructuredContent, &out); err != nil || out.Pid == 0 {
			t.Fatalf("spawn: %s %v", r.StructuredContent, err)
		}
		return who(t, e.mustCall(t, bus.Call{Tool: server + "_whoami", ThreadID: thread})).Pid, out.Pid
	}
	t1, t1Child := spawn("fake", "t1")
	t2, t2Child := spawn("fake", "t2")
	o1, o1Child := spawn("other", "t1")

	closeReq := func(req toolcall.SessionsCloseRequest) int {
		body, _ := json.Marshal(req)
		msg, err := e.bus.NC.Request(toolcall.SubjectSessionsClose(e.bus.Names), body, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var reply toolcall.SessionsCloseReply
		_ = json.Unmarshal(msg.Data, &reply)
		return reply.Closed
	}
	// Per scope: only fake's and other's t1 sessions.
	if n := closeReq(toolcall.SessionsCloseRequest{ThreadID: "t1"}); n != 2 {
		t.Errorf("closed %d sessions for scope default:t1, want 2", n)
	}
	for _, pid := range []int{t1, t1Child, o1, o1Child} {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("process %d of scope t1 to be gone", pid), func() bool { return gone(pid) })
	}
	if gone(t2) || gone(t2Child) {
		t.Fatal("closing scope t1 killed t2's processes")
	}
	// Per server.
	if n := closeReq(toolcall.SessionsCloseRequest{Server: "fake"}); n != 1 {
		t.Errorf("closed %d sessions of server fake, want 1", n)
	}
	for _, pid := range []int{t2, t2Child} {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("process %d of fake to be gone", pid), func() bool { return gone(pid) })
	}
}

// TestResetKeepsSessionsAndCallsInFlight, as an operator sees it: a call
// is running on server "slow" and another thread uses server "fake" when
// the cache is reset (the generation moves). The call in flight answers,
// both stdio processes survive (same pids) and serve the next calls.
func TestResetKeepsSessionsAndCallsInFlight(t *testing.T) {
	t.Parallel()
	e, _, pid, slowPid, blocked := busyPair(t, "slow")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gen, err := bus.BumpGeneration(ctx, e.bus.KV)
	if err != nil {
		t.Fatal(err)
	}
	// The reset has reached toolcall once it acknowledges the generation.
	acks, err := sharedstate.AwaitAcks(ctx, e.bus.JS, e.bus.Presence, gen)
	if err != nil || acks["toolcall"].Acknowledged != 1 {
		t.Fatalf("toolcall's acknowledgement of generation %d: %+v, %v", gen, acks, err)
	}
	if err := blocked.release(t); err != nil {
		t.Fatalf("the call in flight during the reset: %v", err)
	}
	if again := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "t1"})).Pid; again != pid || gone(pid) {
		t.Errorf("fake's process %d did not survive the reset (now %d)", pid, again)
	}
	if again := who(t, e.mustCall(t, bus.Call{Tool: "slow_whoami", ThreadID: "t2"})).Pid; again != slowPid || gone(slowPid) {
		t.Errorf("slow's process %d did not survive the reset (now %d)", slowPid, again)
	}
}

// TestConfigChangeRetiresOnlyTheChangedServer, as an operator sees it:
// server "edited" gets a new definition while a call on it is in flight.
// The call answers (its session is closed only after it), the next call
// of "edited" runs in a new process, and server "fake" keeps its process.
func TestConfigChangeRetiresOnlyTheChangedServer(t *testing.T) {
	t.Parallel()
	e, entry, pid, editedPid, blocked := busyPair(t, "edited")
	changed := strings.Replace(entry, `"FAKE_RECORD"`, `"FAKE_MARK": "edited", "FAKE_RECORD"`, 1)
	e.bus.PublishExtensions(t, cfgOf(map[string]string{"fake": entry, "edited": changed}, ""))
	testkit.Eventually(t, 10*time.Second, "the changed server's session to be retired", func() bool {
		return strings.Contains(e.logs.String(), "sessions of changed MCP servers retired")
	})
	if gone(editedPid) {
		t.Fatal("the config change killed the process of a call in flight")
	}
	if err := blocked.release(t); err != nil {
		t.Fatalf("the call in flight during the config change: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the retired process to be closed after its call", func() bool { return gone(editedPid) })
	if w := who(t, e.mustCall(t, bus.Call{Tool: "edited_whoami", ThreadID: "t2"})); w.Pid == editedPid || w.Env["FAKE_MARK"] != "edited" {
		t.Errorf("edited's next call ran in pid %d (was %d) with FAKE_MARK=%q; want a new process on the new definition", w.Pid, editedPid, w.Env["FAKE_MARK"])
	}
	if again := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "t1"})).Pid; again != pid || gone(pid) {
		t.Errorf("the unchanged server's process %d did not survive (now %d)", pid, again)
	}
}

// busyPair runs toolcall with two servers on the stdio fake (entry):
// "fake", with a session in thread t1, and other, with a session in thread
// t2 and a block call in flight on it. It returns both sessions' pids.
func busyPair(t *testing.T, other string) (e *env, entry string, pid, otherPid int, b *blocked) {
	t.Helper()
	entry, rec := stdioServer(t, "")
	e = start(t, cfgOf(map[string]string{"fake": entry, other: entry}, ""), append(fakeTools("fake"), fakeTools(other)...))
	pid = who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "t1"})).Pid
	otherPid = who(t, e.mustCall(t, bus.Call{Tool: other + "_whoami", ThreadID: "t2"})).Pid
	return e, entry, pid, otherPid, blockCall(t, e, rec, other+"_block", "t2")
}

// blocked is a call of the fake's block tool in flight.
type blocked struct {
	fifo string
	done chan error
}

// blockCall starts a call of tool (a fake's block) in thread and returns
// once the fake has received it.
func blockCall(t *testing.T, e *env, rec, tool, thread string) *blocked {
	t.Helper()
	b := &blocked{fifo: newFifo(t), done: make(chan error, 1)}
	go func() {
		r, err := e.call(t, bus.Call{Tool: tool, ThreadID: thread, Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, b.fifo))})
		if err == nil && text(t, r) != "released" {
			err = fmt.Errorf("block answered %q", text(t, r))
		}
		b.done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the block call to reach the server", func() bool {
		return slices.ContainsFunc(readRecords(t, rec), func(r record) bool { return r.Tool == "block" })
	})
	return b
}

// release ends the call and returns its error. A call something else
// ended has already returned (and its pipe has no reader left), so the
// pipe is opened without blocking.
func (b *blocked) release(t *testing.T) error {
	t.Helper()
	var callErr error
	testkit.Eventually(t, 30*time.Second, "the blocked call to return", func() bool {
		select {
		case callErr = <-b.done:
			return true
		default:
		}
		if f, err := os.OpenFile(b.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_, _ = f.Write([]byte{1})
			_ = f.Close()
		}
		return false
	})
	return callErr
}

func TestCwdAndOperatorTempDirs(t *testing.T) {
	// Not parallel: the whole-string $VAR in cwd is expanded from this
	// process's environment.
	dir := t.TempDir()
	t.Setenv("TOOLCALL_TEST_CWD", dir)
	entry, _ := stdioServer(t, `"cwd": "$TOOLCALL_TEST_CWD"`)
	// (Under redact.MinResultLen bytes: longer env values are masked in
	// results.)
	entry = strings.Replace(entry, `"FAKE_RECORD"`, `"TMPDIR": "/op/tmp", "FAKE_RECORD"`, 1)
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	w := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "t9"}))
	if w.Cwd != dir {
		t.Errorf("cwd = %q, want the configured %q", w.Cwd, dir)
	}
	if w.Env["TMPDIR"] != "/op/tmp" {
		t.Errorf("TMPDIR = %q, want the operator's", w.Env["TMPDIR"])
	}
}

// TestStderrIsLoggedWithTheServerName: the fake prints its env value
// FAKE_STDERR_MARK to stderr; the line is logged (at debug) with the
// server's name and the env values redacted (TOOLCALL_FAKE's "stdio" too:
// every env value of 4 bytes or more is).
func TestStderrIsLoggedWithTheServerName(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"x"}`)})
	testkit.Eventually(t, 10*time.Second, "the stderr line in the log", func() bool {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(line, "server starting: ***") && strings.Contains(line, `"server":"fake"`) &&
				strings.Contains(line, `"msg":"mcp server stderr"`) && strings.Contains(line, `"level":"DEBUG"`) {
				return true
			}
		}
		return false
	})
	if mark := "mark-" + t.Name(); strings.Contains(e.logs.String(), mark) {
		t.Errorf("the log shows the env value %s", mark)
	}
}

func TestTimedOutCallClosesTheSession(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, `"tool_call_timeout": 0.3`)
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	before := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid
	_, err := e.call(t, bus.Call{Tool: "fake_sleep", Arguments: json.RawMessage(`{"ms":30000}`)})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUpstreamTimeout || !strings.Contains(be.Message, "'fake'") {
		t.Fatalf("err = %v, want upstream_timeout naming the server", err)
	}
	testkit.Eventually(t, 10*time.Second, "the timed-out session's process to be gone", func() bool { return gone(before) })
	after := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid
	if before == after {
		t.Error("the session that timed out was reused")
	}
}

func TestSessionInitTimeout(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, `"session_init_timeout": 0.5`)
	entry = strings.Replace(entry, `"FAKE_RECORD"`, `"FAKE_HANG_INIT": "1", "FAKE_RECORD"`, 1)
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	_, err := e.call(t, bus.Call{Tool: "fake_echo"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeInitTimeout || !strings.Contains(be.Message, "'fake'") {
		t.Fatalf("err = %v, want init_timeout naming the server", err)
	}
	if rs := readRecords(t, rec); len(rs) != 0 {
		t.Errorf("the hung server recorded %v", rs)
	}
}

func TestUnknownToolIsNotFound(t *testing.T) {
	t.Parallel()
	e := start(t, `{"mcpServers": {}}`, nil)
	_, err := e.call(t, bus.Call{Tool: "nope_echo"})
	if !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("err = %v, want not_found", err)
	}
}

func TestDeferredToolNeedsPromotion(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	cat := fakeTools("fake")
	for i := range cat {
		cat[i].Deferred = true
	}
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), cat)
	_, err := e.call(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"x"}`)})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeToolDeferred || !strings.Contains(be.Message, "tool_search") {
		t.Fatalf("err = %v, want tool_deferred pointing at tool_search", err)
	}
	if rs := readRecords(t, rec); len(rs) != 0 {
		t.Fatalf("the upstream received %v", rs)
	}
	r := e.mustCall(t, bus.Call{Tool: "fake_echo", Arguments: json.RawMessage(`{"message":"x"}`), Promoted: []string{"fake_echo"}})
	if text(t, r) != "x" {
		t.Errorf("promoted call = %+v", r)
	}
}

func TestMetadataAuthTokenIsRefused(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	for _, meta := range []string{`{"auth_token":"s3cret-value"}`, `{"config":{"metadata":{"auth_token":"s3cret-value"}}}`} {
		_, err := e.call(t, bus.Call{Tool: "fake_echo", Metadata: json.RawMessage(meta)})
		if !errors.Is(err, bus.ErrInvalidRequest) {
			t.Fatalf("%s: err = %v, want invalid_request", meta, err)
		}
		if strings.Contains(err.Error(), "s3cret-value") {
			t.Errorf("error echoes the secret: %v", err)
		}
	}
	// The DeerFlow run shape: config.metadata at the top level of the
	// request, sent over NATS as a client writes it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := json.RawMessage(`{"tool":"fake_echo","arguments":{"message":"x"},"config":{"metadata":{"auth_token":"s3cret-value"}}}`)
	_, err := bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, e.bus.Names.ToolsCall(), raw)
	if !errors.Is(err, bus.ErrInvalidRequest) || strings.Contains(err.Error(), "s3cret-value") {
		t.Fatalf("top-level config.metadata.auth_token over NATS: err = %v, want invalid_request without the value", err)
	}
	if rs := readRecords(t, rec); len(rs) != 0 {
		t.Fatalf("the upstream received %v", rs)
	}
	if strings.Contains(e.logs.String(), "s3cret-value") {
		t.Error("the secret was logged")
	}
}

// TestDemoServerOverStreamableHTTP keeps the demo server (examples) working
// through toolcall.
func TestDemoServerOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	e := start(t, cfgOf(map[string]string{"web": httpServerJSON(hs.URL+"/mcp", `"headers": {"X-Static": "s1"}`)}, ""),
		tools("web", "add", "fail", "whoami"))
	r := e.mustCall(t, bus.Call{Tool: "web_add", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
	if got := text(t, r); got != "5" || !strings.Contains(string(r.StructuredContent), `"sum":5`) {
		t.Errorf("add = %q, %s", got, r.StructuredContent)
	}
	r, err := e.call(t, bus.Call{Tool: "web_fail", Arguments: json.RawMessage(`{"message":"boom"}`)})
	if err != nil || !r.IsError || text(t, r) != "boom" {
		t.Errorf("fail = %+v, %v", r, err)
	}
}

// unusedNATS keeps the nats import when tests are trimmed.
var _ = nats.NewMsg

// A stdio server that dies while its session is idle is reaped at once (no
// zombie waits for the thread's next call), and the next call starts a new
// process.
func TestIdleProcessThatDiesIsReaped(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	pid := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the dead process to be reaped", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return errors.Is(err, os.ErrNotExist)
	})
	testkit.Eventually(t, 10*time.Second, "the exit to be logged with the server", func() bool {
		return strings.Contains(e.logs.String(), "exited on its own") && strings.Contains(e.logs.String(), `"server":"fake"`)
	})
	if again := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami"})).Pid; again == pid || again == 0 {
		t.Errorf("pid after the death = %d (died: %d)", again, pid)
	}
}

// A configured cwd that does not exist is config_error naming the server
// and the field; the host's path stays in the logs, out of the caller's
// message.
func TestMissingCwdIsConfigErrorWithoutThePath(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "operator-only-path")
	entry, _ := stdioServer(t, fmt.Sprintf(`"cwd": %q`, missing))
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake")})
	_, err := e.call(t, bus.Call{Tool: "fake_echo", ThreadID: "a"})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeConfigError || !strings.Contains(be.Message, "'fake'") || !strings.Contains(be.Message, "cwd") {
		t.Fatalf("err = %v, want config_error naming the server and its cwd", err)
	}
	if strings.Contains(be.Message, "operator-only-path") {
		t.Errorf("the caller's message shows the host's path: %q", be.Message)
	}
	if !strings.Contains(e.logs.String(), "operator-only-path") {
		t.Errorf("the path is not in the logs:\n%s", e.logs.String())
	}
}
