package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestToolcallReplicasShareEachThreadsStdioProcess runs two toolcall
// replicas and a discovery process on one NATS server. A thread's calls land
// on either replica, yet each thread has one demo-server process; when a
// replica is SIGKILLed (no goodbye, its heartbeats not yet expired) the
// calls of its threads still succeed on the survivor.
func TestToolcallReplicasShareEachThreadsStdioProcess(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	b.PublishExtensions(t, fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin))
	serve := func(name, service string) *process {
		// Each replica in its own directory, as on its own machine: its
		// workspace root (.mcpbus/workspace) tells which one runs a thread.
		return startProcess(t, t.TempDir(), name, mcpbusBin, "serve", service, "--nats-url", b.URL, "--namespace", b.Names.Namespace())
	}
	serve("discovery", "discovery")
	ra, rb := serve("toolcall-a", "toolcall"), serve("toolcall-b", "toolcall")
	replicaOf := func(cwd string) string {
		switch {
		case strings.HasPrefix(cwd, ra.cmd.Dir):
			return "a"
		case strings.HasPrefix(cwd, rb.cmd.Dir):
			return "b"
		}
		t.Fatalf("cwd %s is under neither replica", cwd)
		return ""
	}
	whoami := func(thread string) (identity struct {
		Pid int    `json:"pid"`
		Cwd string `json:"cwd"`
	}, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := bus.Request[bus.ToolsCallReply](ctx, b.NC, b.Names.ToolsCall(), bus.Call{Tool: "demo_whoami", UserID: "u", ThreadID: thread})
		if err == nil {
			err = json.Unmarshal(r.StructuredContent, &identity)
		}
		return identity, err
	}
	// Both replicas serve and see each other once a call for every thread
	// of a batch comes back from one process per thread, spread over both.
	testkit.Eventually(t, 60*time.Second, "both replicas to serve", func() bool {
		_, err := whoami("probe")
		return err == nil && strings.Contains(ra.out.String(), "replicas changed") && strings.Contains(rb.out.String(), "toolcall service started")
	})
	owners := map[string]string{} // thread → replica
	for i := range 16 {
		thread := fmt.Sprint("t", i)
		first, err := whoami(thread)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			w, err := whoami(thread)
			if err != nil {
				t.Fatal(err)
			}
			if w.Pid != first.Pid {
				t.Fatalf("thread %s answered by processes %d and %d", thread, first.Pid, w.Pid)
			}
		}
		owners[thread] = replicaOf(first.Cwd)
	}
	count := map[string]int{}
	for _, r := range owners {
		count[r]++
	}
	if count["a"] == 0 || count["b"] == 0 {
		t.Fatalf("threads per replica %v; want both to own some", count)
	}

	// Kill b without a goodbye: a gets b's threads' calls (directly, or
	// handed to b and refused), makes them itself, and every call succeeds.
	if err := rb.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = rb.cmd.Wait()
	// Once the NATS server has dropped b's connection, a request to b's
	// hand-over subject finds no responder at once. A request caught in the
	// moment before (delivered to a connection the server has not yet seen
	// close, so never answered) is another case, tested in toolcall:
	// TestHandOverToAReplicaThatDiedEndsUnavailable.
	m := regexp.MustCompile(`replica=(\S+)`).FindStringSubmatch(rb.out.String())
	if m == nil {
		t.Fatalf("no replica id in b's log:\n%s", rb.out.String())
	}
	testkit.Eventually(t, 30*time.Second, "the NATS server to drop the killed replica's subscriptions", func() bool {
		_, err := b.NC.Request(b.Names.Internal("toolcall.stdio."+m[1]), []byte("{}"), 200*time.Millisecond)
		return errors.Is(err, nats.ErrNoResponders)
	})
	for thread, owner := range owners {
		w, err := whoami(thread)
		if err != nil {
			t.Fatalf("thread %s (owned by %s) after b was killed: %v", thread, owner, err)
		}
		if replicaOf(w.Cwd) != "a" {
			t.Errorf("thread %s answered from b's workspace after b was killed", thread)
		}
	}
	ra.stop(t)
}
