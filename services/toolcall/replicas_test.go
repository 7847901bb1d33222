package toolcall_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/presence"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// twoReplicas runs two toolcall replicas on one bus with the stdio fake and
// waits until each sees the other.
func twoReplicas(t *testing.T) (*env, *replica) {
	t.Helper()
	e, r2, _ := twoReplicasRecording(t)
	return e, r2
}

// twoReplicasRecording is twoReplicas that also returns the fake's record
// file.
func twoReplicasRecording(t *testing.T) (*env, *replica, string) {
	t.Helper()
	return twoReplicasServing(t, false)
}

// twoReplicasServing is twoReplicasRecording with the per-user subjects
// served or not (nats.bind_identity).
func twoReplicasServing(t *testing.T, userSubjects bool) (*env, *replica, string) {
	t.Helper()
	entry, rec := stdioServer(t, "")
	o := options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), maxSessions: 64, userSubjects: userSubjects}
	e := startWith(t, o)
	r2 := e.addReplica(t, o)
	testkit.Eventually(t, 10*time.Second, "the replicas to see each other", func() bool {
		l1, _ := e.svc.Replicas()
		l2, _ := r2.svc.Replicas()
		return len(l1) == 2 && len(l2) == 2
	})
	return e, r2, rec
}

// whoamiOn calls fake_whoami for a thread (through whichever replica NATS
// picks) and returns the process that answered.
func whoamiOn(t *testing.T, e *env, thread string) identity {
	t.Helper()
	return who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "u", ThreadID: thread}))
}

// Calls of one thread reach any replica (a queue group), yet the thread
// has one stdio process: the replica that owns the session makes every
// call. Threads are spread over both replicas.
func TestStdioSessionsFollowTheirThreadAcrossReplicas(t *testing.T) {
	t.Parallel()
	e, r2 := twoReplicas(t)
	roots := map[string]int{}
	for i := range 16 {
		thread := fmt.Sprint("t", i)
		first := whoamiOn(t, e, thread)
		for range 11 {
			if got := whoamiOn(t, e, thread); got.Pid != first.Pid {
				t.Fatalf("thread %s answered by processes %d and %d", thread, first.Pid, got.Pid)
			}
		}
		switch {
		case strings.HasPrefix(first.Cwd, e.workspace):
			roots["first"]++
		case strings.HasPrefix(first.Cwd, r2.workspace):
			roots["second"]++
		default:
			t.Fatalf("process cwd %s is under neither replica's workspace", first.Cwd)
		}
	}
	if roots["first"] == 0 || roots["second"] == 0 {
		t.Errorf("threads per replica: %v; want both to own some", roots)
	}
}

// A replica that leaves closes its sessions; the survivor owns every
// thread from then on and starts a new process for the ones it took over.
func TestLeavingReplicaHandsItsThreadsOver(t *testing.T) {
	t.Parallel()
	e, r2 := twoReplicas(t)
	var moved []identity
	for i := 0; len(moved) < 3 && i < 64; i++ {
		if w := whoamiOn(t, e, fmt.Sprint("t", i)); strings.HasPrefix(w.Cwd, r2.workspace) {
			moved = append(moved, w)
		}
	}
	if len(moved) < 3 {
		t.Fatalf("the second replica owns %d of 64 threads", len(moved))
	}
	r2.stop()
	for _, w := range moved {
		if !exited(w.Pid) {
			t.Errorf("process %d of the stopped replica is still running", w.Pid)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the first replica to see the second leave", func() bool {
		live, _ := e.svc.Replicas()
		return len(live) == 1
	})
	for i := range 64 {
		w := whoamiOn(t, e, fmt.Sprint("t", i))
		if !strings.HasPrefix(w.Cwd, e.workspace) || slices.ContainsFunc(moved, func(m identity) bool { return m.Pid == w.Pid }) {
			t.Fatalf("thread t%d after the leave: pid %d in %s", i, w.Pid, w.Cwd)
		}
	}
}

// A replica that is in the presence bucket but does not answer (it died a
// moment ago) does not fail the calls it owns: the replica that got the
// call makes it itself.
func TestUnreachableOwnerFallsBackToTheReceivingReplica(t *testing.T) {
	t.Parallel()
	e, r2 := twoReplicas(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	beat := func() {
		if _, err := e.bus.Presence.PutString(context.Background(), "toolcall.0badc0ffee00", "ghost"); err != nil {
			t.Error(err)
		}
	}
	beat()
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				beat()
			}
		}
	}()
	testkit.Eventually(t, 10*time.Second, "the replicas to see the silent one", func() bool {
		live, _ := e.svc.Replicas()
		return len(live) == 3
	})
	for i := range 30 {
		whoamiOn(t, e, fmt.Sprint("t", i)) // fails the test on an error
	}
	// Some of the 30 threads are the silent replica's (all but certainly:
	// (2/3)^30); whichever replica got their calls says it made them.
	if !strings.Contains(e.logs.String()+r2.logs.String(), "does not answer; calling from here") {
		t.Error("no call was made in place of the silent owner")
	}
}

// A replica that takes a handed-over stdio call down with it (SIGKILL, a
// lost node) never answers; NATS cannot tell that from a slow call. The
// replica that handed the call over ends the wait once the owner's
// heartbeats expire and answers unavailable, not the caller's deadline's
// upstream_timeout. The ghost below is such an owner: its heartbeat is in
// the presence bucket and its stdio subject swallows requests.
func TestHandOverToAReplicaThatDiedEndsUnavailable(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	o := options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake")}
	e := startWith(t, o)
	nc := e.bus.Connect(t)
	var swallowed atomic.Int64
	if _, err := nc.Subscribe(e.bus.Names.Internal("toolcall.stdio.ghost"), func(*nats.Msg) { swallowed.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bus.Presence.PutString(context.Background(), "toolcall.ghost", "x"); err != nil {
		t.Fatal(err)
	}
	var self string
	testkit.Eventually(t, 10*time.Second, "the replica to see the ghost", func() bool {
		live, s := e.svc.Replicas()
		self = s
		return slices.Contains(live, "ghost")
	})
	thread := ""
	for i := 0; thread == ""; i++ {
		th := fmt.Sprint("t", i)
		if presence.Owner([]string{self, "ghost"}, "fake\x00\x00u:"+th) == "ghost" {
			thread = th
		}
	}
	_, err := e.call(t, bus.Call{Tool: "fake_whoami", UserID: "u", ThreadID: thread, TimeoutMS: 120_000})
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUnavailable || !strings.Contains(be.Message, "stopped during the call") {
		t.Fatalf("call handed to a dead owner: %v, want unavailable (the owner stopped during the call)", err)
	}
	if swallowed.Load() != 1 {
		t.Errorf("the ghost received %d hand-overs, want 1", swallowed.Load())
	}
	// The next call of the thread is made here.
	if _, err := e.call(t, bus.Call{Tool: "fake_whoami", UserID: "u", ThreadID: thread}); err != nil {
		t.Fatalf("the next call after the owner was gone: %v", err)
	}
}

// A replica that joins is named owner of some threads as soon as the
// others see its heartbeat, so its hand-over entry must already answer
// then: a hand-over that finds no responder marks it gone, and its
// threads would get a second stdio process on the sender. Every hand-over
// sent the moment the heartbeat appears gets a reply (for this malformed
// body, an error reply) rather than no responders.
func TestAJoiningReplicaAnswersHandOversAtOnce(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	o := options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), quiet: true}
	e := startWith(t, o)
	_, first := e.svc.Replicas()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := e.bus.Presence.Watch(ctx, "toolcall.*", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	nc := e.bus.Connect(t)
	answered := make(chan error, 1)
	go func() {
		for u := range w.Updates() {
			if u == nil || u.Operation() != jetstream.KeyValuePut || u.Key() == "toolcall."+first {
				continue
			}
			id := strings.TrimPrefix(u.Key(), "toolcall.")
			_, err := nc.Request(toolcall.StdioSubject(e.bus.Names, id), []byte(`{}`), 30*time.Second)
			answered <- err
			return
		}
	}()
	e.addReplica(t, o)
	if err := testkit.Receive(t, 30*time.Second, "the hand-over sent when the new replica's heartbeat appeared", answered); err != nil {
		t.Fatalf("hand-over to the joining replica: %v, want a reply", err)
	}
}
