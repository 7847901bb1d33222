package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// agentCalls are an agent worker's calls of the demo stdio server on its
// own subjects.
type agentCalls struct {
	u     *testkit.NATSUser
	user  string
	names bus.Names
}

type callOutcome struct {
	r   bus.ToolsCallReply
	err error
}

func (a agentCalls) call(req bus.Call) (bus.ToolsCallReply, error) {
	return request[bus.ToolsCallReply](a.u.NC, a.names.User(a.user, bus.VerbToolsCall), req)
}

// start runs a call in the background.
func (a agentCalls) start(req bus.Call) chan callOutcome {
	done := make(chan callOutcome, 1)
	go func() {
		r, err := requestWithin[bus.ToolsCallReply](a.u.NC, a.names.User(a.user, bus.VerbToolsCall), req, 150*time.Second)
		done <- callOutcome{r, err}
	}()
	return done
}

// cancel publishes a cancel on the worker's own tools cancel subject.
func (a agentCalls) cancel(t *testing.T, req bus.ToolsCancelRequest) {
	t.Helper()
	body, _ := json.Marshal(req)
	if err := a.u.NC.Publish(a.names.User(a.user, bus.VerbToolsCancel), body); err != nil {
		t.Fatal(err)
	}
}

// cancellations reads the demo process of thread's cancellation counts.
func (a agentCalls) cancellations(t *testing.T, thread string) cancelCounts {
	t.Helper()
	r, err := a.call(bus.Call{Tool: "demo_cancellations", ThreadID: thread})
	if err != nil || r.IsError {
		t.Fatalf("%s: demo_cancellations: %v %v", a.user, r, err)
	}
	var c cancelCounts
	if err := json.Unmarshal(r.StructuredContent, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// block starts demo_block in thread under callID and returns once the
// upstream runs it, with the counts from before.
func (a agentCalls) block(t *testing.T, thread, callID string) (chan callOutcome, cancelCounts) {
	t.Helper()
	before := a.cancellations(t, thread)
	done := a.start(bus.Call{Tool: "demo_block", ThreadID: thread, CallID: callID})
	testkit.Eventually(t, 60*time.Second, a.user+"'s block call to reach the upstream", func() bool {
		return a.cancellations(t, thread).InFlight > before.InFlight
	})
	return done, before
}

// TestNATSPermissionsLetAgentWorkersFollowAndCancelTheirCalls runs a
// deployment with nats.bind_identity on a nats-server configured with
// deploy/nats/accounts.conf as shipped and uses it as alice's and bob's
// agent workers: alice gets her call's progress, in order and before the
// reply, on an inbox under her own inbox prefix (_INBOX_alice), and
// cancels her call on mcpbus.u.alice.tools.cancel (the upstream is told);
// a progress inbox under bob's prefix, mcpbus.internal.> or the api's
// progress prefix is refused; bob's cancels naming alice's call, on his
// own subject, do nothing, and the server refuses his publishing on
// hers.
func TestNATSPermissionsLetAgentWorkersFollowAndCancelTheirCalls(t *testing.T) {
	p := startPermNATS(t, nil)
	pw, addr := p.pw, p.addr
	names := bus.Names{}.WithUserSubjects(true)
	p.startStack(t, names, fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin))
	aliceNC := testkit.ConnectNATSUser(t, "nats://"+addr, "agent-alice", pw["AGENT_ALICE"], "_INBOX_alice")
	bobNC := testkit.ConnectNATSUser(t, "nats://"+addr, "agent-bob", pw["AGENT_BOB"], "_INBOX_bob")
	alice, bob := agentCalls{aliceNC, "alice", names}, agentCalls{bobNC, "bob", names}
	testkit.Eventually(t, 60*time.Second, "the demo server's tools to be callable", func() bool {
		_, err := alice.call(bus.Call{Tool: "demo_echo", Arguments: json.RawMessage(`{"message":"up"}`)})
		return err == nil
	})

	// Progress on her own inbox, in order, before the reply.
	inbox := aliceNC.NC.NewInbox()
	if !strings.HasPrefix(inbox, "_INBOX_alice.") {
		t.Fatalf("alice's inbox %q", inbox)
	}
	msgs := make(chan *nats.Msg, 16)
	if _, err := aliceNC.NC.ChanSubscribe(inbox, msgs); err != nil {
		t.Fatal(err)
	}
	if err := aliceNC.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := alice.call(bus.Call{Tool: "demo_progress", Arguments: json.RawMessage(`{"steps":3}`), ThreadID: "tp",
		CallID: "alice-progress", ProgressInbox: inbox})
	if err != nil || r.IsError {
		t.Fatalf("alice's progress call: %v %v", r, err)
	}
	var got []string
	for len(msgs) > 0 {
		var p struct {
			Progress, Total float64
			Message         string
		}
		if err := json.Unmarshal((<-msgs).Data, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v/%v %s", p.Progress, p.Total, p.Message))
	}
	if want := []string{"1/3 step 1 of 3", "2/3 step 2 of 3", "3/3 step 3 of 3"}; !slices.Equal(got, want) {
		t.Errorf("alice's progress before the reply = %q, want %q", got, want)
	}

	// Any other inbox is refused before anything runs.
	for _, bad := range []string{"_INBOX_bob." + strings.TrimPrefix(inbox, "_INBOX_alice."), names.InternalPrefix() + "x",
		names.InternalToken(), names.NewProgressInbox(), "_INBOX.x", inbox + ".x"} {
		_, err := alice.call(bus.Call{Tool: "demo_progress", ThreadID: "tp", ProgressInbox: bad})
		var be *bus.Error
		if !errors.As(err, &be) || be.Code != bus.CodeInvalidRequest || !strings.Contains(be.Message, "progress_inbox") {
			t.Errorf("alice naming progress inbox %q: %v, want invalid_request naming progress_inbox", bad, err)
		}
	}

	// Her cancel on her own subject ends her call; the upstream is told.
	done, before := alice.block(t, "ta", "alice-block-1")
	alice.cancel(t, bus.ToolsCancelRequest{CallID: "alice-block-1"})
	if o := testkit.Receive(t, 60*time.Second, "alice's call to end after her cancel", done); !errors.Is(o.err, &bus.Error{Code: bus.CodeCancelled}) {
		t.Errorf("alice's cancelled call: %v %v, want code cancelled", o.r, o.err)
	}
	testkit.Eventually(t, 60*time.Second, "the upstream to see alice's call cancelled", func() bool {
		after := alice.cancellations(t, "ta")
		return after.Blocked > before.Blocked && after.Notified > before.Notified
	})

	// Bob's cancels naming her call do nothing. His cancel of his own
	// call, published after them on the same subscription, shows they
	// were handled; hers then is still running and the upstream saw no
	// cancellation until her own cancel.
	victim, before := alice.block(t, "ta", "alice-block-2")
	attacker, _ := bob.block(t, "tb", "bob-block")
	bob.cancel(t, bus.ToolsCancelRequest{CallID: "alice-block-2", UserID: "alice"})
	bob.cancel(t, bus.ToolsCancelRequest{CallID: "alice-block-2"})
	body, _ := json.Marshal(bus.ToolsCancelRequest{CallID: "alice-block-2", UserID: "alice"})
	if err := bobNC.NC.Publish(names.User("alice", bus.VerbToolsCancel), body); err != nil {
		t.Fatal(err)
	}
	bobNC.Refused(t, "bob publishing alice's cancel subject", names.User("alice", bus.VerbToolsCancel))
	bob.cancel(t, bus.ToolsCancelRequest{CallID: "bob-block"})
	if o := testkit.Receive(t, 60*time.Second, "bob's call to end after his cancel", attacker); !errors.Is(o.err, &bus.Error{Code: bus.CodeCancelled}) {
		t.Fatalf("bob's own cancelled call: %v %v, want code cancelled", o.r, o.err)
	}
	select {
	case o := <-victim:
		t.Fatalf("bob's cancels ended alice's call: %v %v", o.r, o.err)
	default:
	}
	if now := alice.cancellations(t, "ta"); now.InFlight != before.InFlight+1 || now.Notified != before.Notified || now.Blocked != before.Blocked {
		t.Errorf("after bob's cancels alice's upstream shows %+v (before her call %+v): her call was cancelled", now, before)
	}
	alice.cancel(t, bus.ToolsCancelRequest{CallID: "alice-block-2"})
	if o := testkit.Receive(t, 60*time.Second, "alice's call to end after her own cancel", victim); !errors.Is(o.err, &bus.Error{Code: bus.CodeCancelled}) {
		t.Errorf("alice's call after her own cancel: %v %v, want code cancelled", o.r, o.err)
	}
	testkit.Eventually(t, 60*time.Second, "the upstream to see alice's call cancelled once", func() bool {
		after := alice.cancellations(t, "ta")
		return after.Blocked == before.Blocked+1 && after.Notified == before.Notified+1 && after.InFlight == before.InFlight
	})
}
