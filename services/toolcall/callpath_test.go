package toolcall_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// callFrame is one frame of a goroutine's stack (testkit.CallStack).
type callFrame = testkit.Frame

// callStack is testkit.CallStack: the call's goroutine's frames of this
// repository, outermost first.
func callStack(marks ...string) []callFrame { return testkit.CallStack(marks...) }

// The code-path facts of docs/architecture.md: the functions and files a
// tool call crosses on its way through toolcall to the upstream client,
// read off the goroutine that serves it while the upstream holds the call
// (go test -v -run TestCallPathFacts ./services/toolcall). One goroutine
// carries the call from the bus handler to mcpclient's send: no hop,
// no context value (TestNoCallDataInContextValues in cmd/mcpbus).
//
// Not parallel: the goroutine dump must hold this test's calls alone.
func TestCallPathFacts(t *testing.T) {
	entry, rec := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	fifo := newFifo(t)
	done := make(chan error, 1)
	go func() {
		_, err := e.call(t, bus.Call{Tool: "fake_block", Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, fifo))})
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the block call to reach the server", func() bool {
		return slices.ContainsFunc(readRecords(t, rec), func(r record) bool { return r.Tool == "block" })
	})
	stack := callStack("toolcall.(*Service).handleCall(", "mcpclient.(*Client).send(")
	releaseFifo(t, fifo)
	if err := testkit.Receive(t, 30*time.Second, "the block call to return", done); err != nil {
		t.Fatal(err)
	}
	if len(stack) == 0 {
		t.Fatal("no goroutine carries the call from handleCall to mcpclient's send")
	}
	fns := logPath(t, "a tools/call through toolcall", stack)
	for _, want := range []string{"toolcall.(*Service).handleCall", "toolcall.(*Service).callCatalog", "toolcall.(*Service).invoke", "mcpclient.(*Client).CallTool"} {
		if !slices.ContainsFunc(fns, func(fn string) bool { return strings.Contains(fn, want) }) {
			t.Errorf("the call's stack lacks %s", want)
		}
	}
}

// logPath logs the functions, files and packages of stack and returns the
// functions.
func logPath(t *testing.T, what string, stack []callFrame) []string {
	t.Helper()
	files, pkgs := map[string]bool{}, map[string]int{}
	var fns []string
	for _, f := range stack {
		files[f.File] = true
		pkgs[f.Func[:strings.Index(f.Func, ".")]]++
		fns = append(fns, f.Func)
	}
	t.Logf("%s: %d functions in %d files of %d packages, on one goroutine:\n  %s", what, len(stack), len(files), len(pkgs), strings.Join(fns, "\n  "))
	t.Logf("files: %v", slices.Sorted(func(yield func(string) bool) {
		for f := range files {
			if !yield(f) {
				return
			}
		}
	}))
	return fns
}

// The hand-over's facts: a call that lands on the replica that does not
// own its stdio session runs the pipeline up to the route step there
// (handOver) and enters the owner at invoke (handleStdioCall), each side
// on one goroutine (go test -v -run TestHandOverPathFacts
// ./services/toolcall).
//
// Not parallel: the goroutine dump must hold this test's calls alone.
func TestHandOverPathFacts(t *testing.T) {
	e, _, rec := twoReplicasServing(t, false)
	for i := 0; ; i++ {
		if i == 64 {
			t.Fatal("64 threads' calls all landed on their sessions' owners")
		}
		fifo := newFifo(t)
		done := make(chan error, 1)
		thread := fmt.Sprint("handed-", i)
		go func() {
			_, err := e.call(t, bus.Call{Tool: "fake_block", ThreadID: thread, Arguments: json.RawMessage(fmt.Sprintf(`{"fifo": %q}`, fifo))})
			done <- err
		}()
		testkit.Eventually(t, 10*time.Second, "the block call to reach the server", func() bool {
			return slices.ContainsFunc(readRecords(t, rec), func(r record) bool { return r.Tool == "block" && strings.Contains(string(r.Args), fifo) })
		})
		sender := callStack("toolcall.(*Service).handOver(")
		owner := callStack("toolcall.(*Service).handleStdioCall(", "mcpclient.(*Client).send(")
		releaseFifo(t, fifo)
		if err := testkit.Receive(t, 30*time.Second, "the block call to return", done); err != nil {
			t.Fatal(err)
		}
		if len(sender) == 0 {
			continue // it landed on the owner: try another thread
		}
		if len(owner) == 0 {
			t.Fatal("the owner runs no handed-over call on one goroutine down to mcpclient's send")
		}
		logPath(t, "the receiving replica, up to the hand-over", sender)
		fns := logPath(t, "the owner, from the hand-over to the upstream", owner)
		for _, want := range []string{"toolcall.(*Service).invoke", "mcpclient.(*Client).CallTool"} {
			if !slices.ContainsFunc(fns, func(fn string) bool { return strings.Contains(fn, want) }) {
				t.Errorf("the owner's stack lacks %s", want)
			}
		}
		return
	}
}
