package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// Progress reaches the call's inbox in order and before the reply, and the
// result's _meta passes through, whichever replica the call lands on (the
// stdio hand-over to the session's owner carries the inbox).
func TestProgressReachesTheInboxAcrossReplicas(t *testing.T) {
	t.Parallel()
	e, _ := twoReplicas(t)
	for i := range 8 {
		inbox := e.bus.Names.NewProgressInbox()
		msgs := make(chan *nats.Msg, 16)
		sub, err := e.bus.NC.ChanSubscribe(inbox, msgs)
		if err != nil {
			t.Fatal(err)
		}
		r := e.mustCall(t, bus.Call{Tool: "fake_progress", UserID: "u", ThreadID: fmt.Sprint("p", i),
			CallID: fmt.Sprint("call-", i), ProgressInbox: inbox})
		_ = sub.Unsubscribe()
		var got []float64
		for len(msgs) > 0 {
			var p struct {
				Progress float64         `json:"progress"`
				Token    json.RawMessage `json:"progressToken"`
			}
			if err := json.Unmarshal((<-msgs).Data, &p); err != nil {
				t.Fatal(err)
			}
			if p.Token != nil {
				t.Errorf("the upstream's progressToken reached the inbox: %s", p.Token)
			}
			got = append(got, p.Progress)
		}
		if fmt.Sprint(got) != "[1 2 3]" {
			t.Errorf("thread p%d: progress before the reply = %v, want [1 2 3]", i, got)
		}
		if string(r.Meta) != `{"fake/steps":3}` {
			t.Errorf("thread p%d: reply meta = %s", i, r.Meta)
		}
	}
}

// mcpbus.tools.cancel, published once while the upstream runs the call,
// ends it on whichever replica runs it (the stdio session's owner, through
// a hand-over or not), the call replies cancelled, the upstream saw its
// context end, and the stdio session, process included, keeps serving the
// thread.
func TestCancelEndsTheCallAndKeepsTheSession(t *testing.T) {
	t.Parallel()
	e, _, rec := twoReplicasRecording(t)
	for i := range 4 {
		thread := fmt.Sprint("c", i)
		before := whoamiOn(t, e, thread)
		callID := fmt.Sprint("cancel-me-", i)
		args := fmt.Sprintf(`{"ms":%d}`, 60000+i)
		done := make(chan error, 1)
		go func() {
			_, err := e.call(t, bus.Call{Tool: "fake_sleep", Arguments: json.RawMessage(args),
				UserID: "u", ThreadID: thread, CallID: callID})
			done <- err
		}()
		testkit.Eventually(t, 30*time.Second, "the upstream to run the sleep call", func() bool {
			for _, r := range readRecords(t, rec) {
				if r.Tool == "sleep" && string(r.Args) == args && r.Pid == before.Pid {
					return true
				}
			}
			return false
		})
		body, _ := json.Marshal(bus.ToolsCancelRequest{CallID: callID, UserID: "u"})
		if err := e.bus.NC.Publish(e.bus.Names.ToolsCancel(), body); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("thread %s: the call did not end after its cancel", thread)
		}
		if !errors.Is(err, &bus.Error{Code: bus.CodeCancelled}) {
			t.Errorf("thread %s: cancelled call: %v, want code cancelled", thread, err)
		}
		if after := whoamiOn(t, e, thread); after.Pid != before.Pid {
			t.Errorf("thread %s: process %d replaced by %d after a cancel", thread, before.Pid, after.Pid)
		}
	}
}

// toolcall publishes progress only under Names.ProgressInboxPrefix: a request
// naming any other subject (an internal one, a wildcard) is refused before
// anything runs.
func TestProgressInboxOutsideItsPrefixIsRefused(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake")})
	pre := e.bus.Names.ProgressInboxPrefix()
	for _, inbox := range []string{e.bus.Names.InternalToken(), pre + "*", pre + "a.b", pre, pre + ">", "mcpbus.progress.x" + pre} {
		_, err := e.call(t, bus.Call{Tool: "fake_echo", UserID: "u", ProgressInbox: inbox})
		if !errors.Is(err, bus.ErrInvalidRequest) {
			t.Errorf("progress_inbox %q: %v, want invalid_request", inbox, err)
		}
	}
}

// A log_level that is not one of MCP's levels, or one without a progress
// inbox to publish the messages to, is refused naming log_level before
// anything runs (never echoing the value).
func TestLogLevelIsChecked(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := startWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake")})
	inbox := e.bus.Names.NewProgressInbox()
	for _, req := range []bus.Call{
		{Tool: "fake_echo", UserID: "u", ProgressInbox: inbox, LogLevel: "verbose-secret"},
		{Tool: "fake_echo", UserID: "u", LogLevel: "debug"},
	} {
		_, err := e.call(t, req)
		if !errors.Is(err, bus.ErrInvalidRequest) || !strings.Contains(err.Error(), "log_level") || strings.Contains(err.Error(), "verbose-secret") {
			t.Errorf("log_level %q (inbox %q): %v, want invalid_request naming log_level", req.LogLevel, req.ProgressInbox, err)
		}
	}
	if r := e.mustCall(t, bus.Call{Tool: "fake_echo", UserID: "u", ProgressInbox: inbox, LogLevel: "warning", Arguments: []byte(`{"message":"hi"}`)}); r.IsError {
		t.Errorf("a call with a valid log_level failed: %+v", r)
	}
}
