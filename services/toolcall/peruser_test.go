package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// callOn is e.call on subject.
func (e *env) callOn(t *testing.T, subject string, req bus.Call) (bus.ToolsCallReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc := e.bus.NC
	if user, ok := e.bus.Names.UserOf(subject); ok {
		// The services answer a per-user subject on that user's own
		// inboxes only, as its agent worker receives them.
		own, err := nats.Connect(nc.ConnectedUrl(), nats.CustomInboxPrefix(strings.TrimSuffix(bus.UserInboxPrefix(user), ".")))
		if err != nil {
			t.Fatal(err)
		}
		defer own.Close()
		nc = own
	}
	return bus.Request[bus.ToolsCallReply](ctx, nc, subject, req)
}

// progressValues returns the progress values received on msgs until now
// (the call's reply came after all of them).
func progressValues(t *testing.T, msgs chan *nats.Msg) []float64 {
	t.Helper()
	var got []float64
	for len(msgs) > 0 {
		var p struct {
			Progress float64 `json:"progress"`
		}
		if err := json.Unmarshal((<-msgs).Data, &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Progress)
	}
	return got
}

// subscribeInbox subscribes to inbox (unsubscribed when the test ends).
func subscribeInbox(t *testing.T, nc *nats.Conn, inbox string) chan *nats.Msg {
	t.Helper()
	msgs := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe(inbox, msgs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return msgs
}

// A call on the per-user subject takes a progress inbox under its user's
// own NATS inbox prefix, whichever replica makes it (the stdio hand-over
// carries the inbox and that the call was bound), and no other inbox:
// neither another user's, nor the deployment's progress prefix, nor
// anything else. The plain subject keeps its rule.
func TestPerUserCallProgressInbox(t *testing.T) {
	t.Parallel()
	e, _, _ := twoReplicasServing(t, true)
	names := e.bus.Names
	for i := range 8 {
		inbox := bus.UserInboxPrefix("u") + fmt.Sprint("p", i)
		msgs := subscribeInbox(t, e.bus.NC, inbox)
		if _, err := e.callOn(t, names.User("u", bus.VerbToolsCall), bus.Call{Tool: "fake_progress", ThreadID: fmt.Sprint("p", i),
			CallID: fmt.Sprint("call-", i), ProgressInbox: inbox}); err != nil {
			t.Fatalf("thread p%d: %v", i, err)
		}
		if got := progressValues(t, msgs); fmt.Sprint(got) != "[1 2 3]" {
			t.Errorf("thread p%d: progress before the reply = %v, want [1 2 3]", i, got)
		}
	}
	for _, inbox := range []string{bus.UserInboxPrefix("v") + "x", names.NewProgressInbox(), names.InternalToken(),
		bus.UserInboxPrefix("u") + "a.b", bus.UserInboxPrefix("u") + "*", bus.UserInboxPrefix("u") + ">", bus.UserInboxPrefix("u"), "_INBOX.x"} {
		_, err := e.callOn(t, names.User("u", bus.VerbToolsCall), bus.Call{Tool: "fake_echo", ProgressInbox: inbox})
		if !errors.Is(err, bus.ErrInvalidRequest) || !errorNames(err, "progress_inbox") {
			t.Errorf("per-user call, progress_inbox %q: %v, want invalid_request naming progress_inbox", inbox, err)
		}
	}
	if _, err := e.callOn(t, names.ToolsCall(), bus.Call{Tool: "fake_echo", UserID: "u", ProgressInbox: bus.UserInboxPrefix("u") + "x"}); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("plain call with a user's inbox: %v, want invalid_request", err)
	}
}

// The ask inbox of a call on the per-user subject follows the progress
// inbox's rule: the deployment's ask prefix (the api's relays, which
// another user's calls use) is refused there, as is another user's inbox;
// the plain subject keeps the ask prefix.
func TestPerUserCallAskInbox(t *testing.T) {
	t.Parallel()
	e, _, _ := twoReplicasServing(t, true)
	names := e.bus.Names
	for _, inbox := range []string{names.NewAskInbox(), bus.UserInboxPrefix("v") + "x", names.User("v", bus.VerbToolsCall), "_INBOX.x"} {
		_, err := e.callOn(t, names.User("u", bus.VerbToolsCall), bus.Call{Tool: "fake_echo", AskInbox: inbox})
		if !errors.Is(err, bus.ErrInvalidRequest) || !errorNames(err, "ask_inbox") {
			t.Errorf("per-user call, ask_inbox %q: %v, want invalid_request naming ask_inbox", inbox, err)
		}
	}
	if _, err := e.callOn(t, names.User("u", bus.VerbToolsCall), bus.Call{Tool: "fake_echo", AskInbox: bus.UserInboxPrefix("u") + "x"}); err != nil {
		t.Errorf("per-user call with an ask inbox under its own prefix: %v", err)
	}
	if _, err := e.callOn(t, names.ToolsCall(), bus.Call{Tool: "fake_echo", UserID: "u", AskInbox: bus.UserInboxPrefix("u") + "x"}); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("plain call with a user's inbox as ask inbox: %v, want invalid_request", err)
	}
}

// errorNames reports an error whose message names field.
func errorNames(err error, field string) bool {
	var e *bus.Error
	return errors.As(err, &e) && strings.Contains(e.Message, field)
}

// The stdio hand-over entry applies the per-user rule only to a call the
// sending replica says was bound, for that call's user.
func TestHandOverCarriesThePerUserInboxRule(t *testing.T) {
	t.Parallel()
	e, _, _ := twoReplicasServing(t, true)
	_, self := e.svc.Replicas()
	subject := toolcall.StdioSubject(e.bus.Names, self)
	handOver := func(inbox string, bound bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := bus.Request[bus.InternalCallReply](ctx, e.bus.NC, subject, map[string]any{
			"server": "fake", "raw_tool": "progress", "user_bound": bound,
			"call": map[string]any{"user_id": "u", "thread_id": "h", "progress_inbox": inbox}})
		return err
	}
	inbox := bus.UserInboxPrefix("u") + "handed"
	msgs := subscribeInbox(t, e.bus.NC, inbox)
	if err := handOver(inbox, true); err != nil {
		t.Fatalf("a bound call's hand-over with its user's inbox: %v", err)
	}
	if got := progressValues(t, msgs); fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("handed-over progress = %v, want [1 2 3]", got)
	}
	for _, c := range []struct {
		inbox string
		bound bool
	}{{inbox, false}, {bus.UserInboxPrefix("v") + "x", true}, {e.bus.Names.NewProgressInbox(), true}} {
		if err := handOver(c.inbox, c.bound); !errors.Is(err, bus.ErrInvalidRequest) {
			t.Errorf("hand-over of %q (bound %v): %v, want invalid_request", c.inbox, c.bound, err)
		}
	}
}

// perUserCalls starts calls on per-user subjects of e and publishes
// cancels there.
type perUserCalls struct {
	e   *env
	rec string // the stdio fake's record file
}

type outcome struct {
	r   bus.ToolsCallReply
	err error
}

// start calls fake_<tool> as user on the user's subject and returns once
// the upstream runs it (args tell the calls apart in the records).
func (p perUserCalls) start(t *testing.T, user, thread, callID, tool, args string) chan outcome {
	t.Helper()
	done := make(chan outcome, 1)
	go func() {
		r, err := p.e.callOn(t, p.e.bus.Names.User(user, bus.VerbToolsCall), bus.Call{Tool: "fake_" + tool,
			Arguments: json.RawMessage(args), ThreadID: thread, CallID: callID})
		done <- outcome{r, err}
	}()
	testkit.Eventually(t, 30*time.Second, user+"'s call to reach the upstream", func() bool {
		for _, r := range readRecords(t, p.rec) {
			if r.Tool == tool && string(r.Args) == args {
				return true
			}
		}
		return false
	})
	return done
}

// cancel publishes req on user's tools cancel subject.
func (p perUserCalls) cancel(t *testing.T, user string, req bus.ToolsCancelRequest) {
	t.Helper()
	body, _ := json.Marshal(req)
	if err := p.e.bus.NC.Publish(p.e.bus.Names.User(user, bus.VerbToolsCancel), body); err != nil {
		t.Fatal(err)
	}
}

// blockArgs are the arguments of a fake_block call waiting on a new fifo.
func blockArgs(t *testing.T) (fifo, args string) {
	fifo = newFifo(t)
	b, _ := json.Marshal(map[string]string{"fifo": fifo})
	return fifo, string(b)
}

// release writes the byte that ends a fake_block call waiting on fifo,
// without waiting for a reader (releaseFifo would hang on a call that a
// cancel already ended: the test then fails instead).
func release(t *testing.T, fifo string) {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
}

// mcpbus.u.<user>.tools.cancel, published once, cancels that user's call
// on whichever replica runs it (the stdio session's owner, through a
// hand-over or not): the call replies cancelled.
func TestPerUserCancelEndsTheCallOnAnyReplica(t *testing.T) {
	t.Parallel()
	e, _, rec := twoReplicasServing(t, true)
	p := perUserCalls{e, rec}
	for i := range 4 {
		callID := fmt.Sprint("cancel-me-", i)
		done := p.start(t, "u", fmt.Sprint("c", i), callID, "sleep", fmt.Sprintf(`{"ms":%d}`, 60000+i))
		p.cancel(t, "u", bus.ToolsCancelRequest{CallID: callID})
		if o := testkit.Receive(t, 30*time.Second, "the call to end after its user's cancel", done); !errors.Is(o.err, &bus.Error{Code: bus.CodeCancelled}) {
			t.Errorf("thread c%d: %v %v, want code cancelled", i, o.r, o.err)
		}
	}
}

// The user of a cancel on a per-user subject is the subject's: another
// user's cancel on that user's own subject naming the call (with the
// victim's user_id in the body or none), and a cancel on the victim's
// subject whose body names another user, do nothing: the victim's call,
// released, completes. The attacker's cancel of its own call, published
// after the forged ones (one publisher, one subscription: in order), is
// the barrier that shows the replica handled them.
func TestPerUserCancelOfAnotherUsersCallDoesNothing(t *testing.T) {
	t.Parallel()
	entry, rec := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), maxSessions: 16, userSubjects: true})
	p := perUserCalls{e, rec}
	for i := range 3 {
		victimID, attackerID := fmt.Sprint("victim-call-", i), fmt.Sprint("attacker-call-", i)
		fifo, args := blockArgs(t)
		victim := p.start(t, "u", fmt.Sprint("victim", i), victimID, "block", args)
		attacker := p.start(t, "v", fmt.Sprint("attacker", i), attackerID, "sleep", fmt.Sprintf(`{"ms":%d}`, 60000+i))

		p.cancel(t, "v", bus.ToolsCancelRequest{CallID: victimID, UserID: "u"})
		p.cancel(t, "v", bus.ToolsCancelRequest{CallID: victimID})
		p.cancel(t, "u", bus.ToolsCancelRequest{CallID: victimID, UserID: "v"})
		p.cancel(t, "v", bus.ToolsCancelRequest{CallID: attackerID})
		if o := testkit.Receive(t, 30*time.Second, "the attacker's own call to end after its cancel", attacker); !errors.Is(o.err, &bus.Error{Code: bus.CodeCancelled}) {
			t.Fatalf("round %d: the attacker's own cancelled call: %v, want code cancelled", i, o.err)
		}
		release(t, fifo)
		if o := testkit.Receive(t, 30*time.Second, "the victim's call to complete once released", victim); o.err != nil || text(t, o.r) != "released" {
			t.Errorf("round %d: the victim's call: %v %v, want released (a forged cancel ended it)", i, o.r, o.err)
		}
	}
}
