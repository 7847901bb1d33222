package taskpoller

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// callTool calls a raw tool of the task's server with {"task_id": remote id}
// through the toolcall service (mcpbus.internal.call), bounded by the
// server's tool_call_timeout and never longer than the lease. ctx being
// cancelled (the service stopping) cancels the call.
func (p *poller) callTool(ctx context.Context, t *store.Task, tool string) (bus.InternalCallReply, error) {
	timeout := p.callTimeout(t)
	args, _ := json.Marshal(map[string]string{"task_id": t.RemoteTaskID})
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return bus.Request[bus.InternalCallReply](cctx, p.nc, p.s.deps.Names.InternalCall(), bus.InternalCallRequest{
		Server: t.ServerName, Call: bus.Call{Tool: tool, Arguments: args, UserID: t.UserID, ThreadID: t.ThreadID, TimeoutMS: timeout.Milliseconds()},
	})
}

// callTimeout bounds one remote call for t: the server's
// tool_call_timeout, never longer than the lease.
func (p *poller) callTimeout(t *store.Task) time.Duration {
	if d, ok := p.cfg.CallTimeouts[t.ServerName]; ok && d > 0 {
		return min(d, p.cfg.Lease)
	}
	return p.cfg.Lease
}

// callErrorText is the text recorded for a failed call: the public message
// of a bus error (never an internal cause), else the error itself.
func callErrorText(err error) string {
	var e *bus.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

// since returns how long ago t was, or 0 for nil.
func since(now time.Time, t *time.Time) time.Duration {
	if t == nil {
		return 0
	}
	return max(now.Sub(*t), 0)
}
