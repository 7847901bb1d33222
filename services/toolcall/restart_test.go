package toolcall_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// The NATS server restarts under a running toolcall service: calls work
// again once the connections are back, on the same stdio process (the
// sessions do not depend on the bus), the replica is still in the
// presence bucket, and a config published after the restart is followed.
func TestCallsWorkAgainAfterTheBusRestarts(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e := start(t, cfgOf(map[string]string{"fake": entry}, ""), append(fakeTools("fake"), fakeTools("later")...))
	req := bus.Call{Tool: "fake_whoami", UserID: "u", ThreadID: "t"}
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
		r, err := bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, e.bus.Names.ToolsCall(), req)
		after = r
		return err == nil
	})
	if pid := who(t, after).Pid; pid != before {
		t.Errorf("the stdio process changed across the bus restart: %d then %d", before, pid)
	}
	testkit.Eventually(t, 30*time.Second, "the heartbeat to be written again", func() bool {
		return heartbeat() > beatBefore
	})
	// Both watches start again on the reconnect rather than when the
	// library notices its consumers are gone (about 20 s later).
	testkit.Eventually(t, 30*time.Second, "the watches to start again", func() bool {
		logs := e.logs.String()
		return strings.Contains(logs, "watching the shared config again after a reconnect") && strings.Contains(logs, "watching the replicas again")
	})
	e.bus.PublishExtensions(t, cfgOf(map[string]string{"fake": entry, "later": entry}, ""))
	testkit.Eventually(t, 30*time.Second, "the config published after the restart to be followed", func() bool {
		_, err := e.call(t, bus.Call{Tool: "later_echo", Arguments: []byte(`{"message":"x"}`)})
		return err == nil
	})
}
