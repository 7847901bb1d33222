package toolcall_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// During a rolling upgrade a replica of the previous release hands stdio
// calls to an owner of this release in the previous flat body (no call,
// no raw_tool): the owner makes the same call, with its arguments on the
// upstream and its progress in its user's inbox under the per-user rule.
func TestOwnerServesThePreviousReleasesHandOver(t *testing.T) {
	t.Parallel()
	e, _, _ := twoReplicasServing(t, true)
	_, self := e.svc.Replicas()
	subject := toolcall.StdioSubject(e.bus.Names, self)
	handOver := func(body string) (bus.InternalCallReply, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return bus.Request[bus.InternalCallReply](ctx, e.bus.NC, subject, json.RawMessage(body))
	}

	reply, err := handOver(`{"server":"fake","tool":"echo","arguments":{"message":"from the previous release"},"user_id":"u","thread_id":"h"}`)
	if err != nil {
		t.Fatalf("the previous release's hand-over of echo: %v", err)
	}
	if len(reply.Content) != 1 || !json.Valid(reply.Content[0]) {
		t.Fatalf("reply content = %s", reply.Content)
	}
	var text struct{ Text string }
	if err := json.Unmarshal(reply.Content[0], &text); err != nil || text.Text != "from the previous release" || reply.IsError {
		t.Errorf("echo answered %s (error %v), want the arguments' message", reply.Content[0], reply.IsError)
	}

	inbox := bus.UserInboxPrefix("u") + "prev"
	msgs := subscribeInbox(t, e.bus.NC, inbox)
	if _, err := handOver(fmt.Sprintf(`{"server":"fake","tool":"progress","user_id":"u","thread_id":"h","progress_inbox":%q,"user_bound":true}`, inbox)); err != nil {
		t.Fatalf("the previous release's hand-over of progress: %v", err)
	}
	if got := progressValues(t, msgs); fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("handed-over progress = %v, want [1 2 3]", got)
	}
	// The per-user rule holds for the previous body too: another user's
	// inbox is refused.
	other := bus.UserInboxPrefix("v") + "x"
	if _, err := handOver(fmt.Sprintf(`{"server":"fake","tool":"progress","user_id":"u","thread_id":"h","progress_inbox":%q,"user_bound":true}`, other)); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("a previous-release hand-over with another user's inbox: %v, want invalid_request", err)
	}
}
