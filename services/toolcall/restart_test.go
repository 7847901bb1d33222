package toolcall_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// The NATS server restarts under a running toolcall service: calls work
// again once the connections are back, on the same stdio process (the
// sessions do not depend on the bus), and the replica is still in the
// presence bucket.
func TestCallsWorkAgainAfterTheBusRestarts(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), fakeTools("fake"))
	req := bus.ToolsCallRequest{Tool: "fake_whoami", UserID: "u", ThreadID: "t"}
	before := who(t, e.mustCall(t, req)).Pid
	_, self := e.svc.Replicas()
	heartbeat := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		entry, err := e.bus.Presence.Get(ctx, "toolcall."+self)
		if err != nil {
			return 0
		}
		return entry.Revision()
	}
	beatBefore := heartbeat()
	if beatBefore == 0 {
		t.Fatal("no heartbeat before the restart")
	}

	e.bus.Restart(t)

	var after bus.ToolsCallReply
	testkit.Eventually(t, 30*time.Second, "a call to succeed after the restart", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, bus.SubjectToolsCall, req)
		after = r
		return err == nil
	})
	if pid := who(t, after).Pid; pid != before {
		t.Errorf("the stdio process changed across the bus restart: %d then %d", before, pid)
	}
	testkit.Eventually(t, 30*time.Second, "the heartbeat to be written again", func() bool {
		return heartbeat() > beatBefore
	})
}
