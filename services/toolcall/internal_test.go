package toolcall_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

func internalCall(t *testing.T, e *env, req bus.InternalCallRequest) (bus.InternalCallReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return bus.Request[bus.InternalCallReply](ctx, e.bus.NC, e.bus.Names.InternalCall(), req)
}

// TestInternalCallUsesBackgroundCredentials: the task poller's calls
// (mcpbus.internal.call) skip headers_from_context, keep static, OAuth and
// the owner's user_auth credential, and share the owner's thread session.
func TestInternalCallUsesBackgroundCredentials(t *testing.T) {
	t.Parallel()
	f := newHTTPFake(t, false)
	entry, _ := stdioServer(t, "")
	web := httpServerJSON(f.URL, `"headers": {"X-Static": "s"}, "user_auth": {"header": "X-User", "users": {"alice": "ua"}}, "headers_from_context": {"headers": {"X-Tenant": "tenant"}}`)
	e := start(t, cfgOf(map[string]string{"web": web, "fake": entry}, ""), append(fakeTools("web"), fakeTools("fake")...))

	r, err := internalCall(t, e, bus.InternalCallRequest{Server: "web", Call: bus.Call{Tool: "echo", Arguments: json.RawMessage(`{"message":"poll"}`), UserID: "alice", ThreadID: "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Content) != 1 || r.IsError {
		t.Fatalf("reply = %+v", r)
	}
	h := f.calls("tools/call")[0].Headers
	if h["X-Static"] != "s" || h["X-User"] != "ua" || h["X-Tenant"] != "" {
		t.Errorf("headers = %v", h)
	}

	agent := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", UserID: "alice", ThreadID: "t1"})).Pid
	r, err = internalCall(t, e, bus.InternalCallRequest{Server: "fake", Call: bus.Call{Tool: "whoami", UserID: "alice", ThreadID: "t1"}})
	if err != nil {
		t.Fatal(err)
	}
	var w identity
	if err := json.Unmarshal(r.StructuredContent, &w); err != nil || w.Pid != agent {
		t.Errorf("internal call ran in pid %d, the thread's session is %d (%v)", w.Pid, agent, err)
	}

	_, err = internalCall(t, e, bus.InternalCallRequest{Server: "gone", Call: bus.Call{Tool: "echo", UserID: "alice", ThreadID: "t1"}})
	if !bus.IsPermanentCallError(err) {
		t.Errorf("unknown server: err = %v, want a permanent call error", err)
	}

	// A background call has no request secrets: one carrying some is
	// refused naming the field, without the value, and nothing is sent.
	sent := len(f.calls("tools/call"))
	_, err = internalCall(t, e, bus.InternalCallRequest{Server: "web", Call: bus.Call{Tool: "echo", UserID: "alice", ThreadID: "t1",
		Context: &bus.CallContext{Secrets: map[string]string{"tenant": "s3cret-background"}}}})
	if be := bus.AsError(err); be == nil || be.Code != bus.CodeInvalidRequest || !strings.HasPrefix(be.Message, "context:") || strings.Contains(err.Error(), "s3cret-background") {
		t.Errorf("an internal call with request secrets: %v, want invalid_request naming context", err)
	}
	if n := len(f.calls("tools/call")); n != sent {
		t.Errorf("the upstream received %d more calls", n-sent)
	}
}
