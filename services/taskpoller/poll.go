package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// poll makes one status call for a claimed row and applies its outcome
// under the lease.
func (p *poller) poll(ctx context.Context, st *passStats, t store.Task) {
	s := p.settings()
	start := p.clock()
	st.addDueDelay(since(start, t.NextPollAt))
	if t.DriverName != tasks.DriverStructured {
		msg := tasks.UnknownDriverError(t.DriverName).Error()
		p.updateTask(ctx, st, t.ID, func(row *store.Task) { tasks.ApplyPollError(row, msg, start, s) })
		return
	}
	tool, err := tasks.ToolFor(t.DriverData, tasks.RoleStatus)
	if err != nil {
		p.updateTask(ctx, st, t.ID, func(row *store.Task) { tasks.ApplyFailure(row, err.Error(), start, s) })
		return
	}
	reply, err := p.callTool(ctx, &t, tool)
	at := p.clock()                     // when the call completed: the base of the next poll or backoff
	if err != nil && ctx.Err() != nil { // stopping: the call was cancelled
		p.releaseLease(ctx, st, t.ID)
		return
	}
	var apply func(*store.Task)
	switch {
	case err != nil && bus.IsPermanentCallError(err):
		msg := callErrorText(err)
		apply = func(row *store.Task) { tasks.ApplyFailure(row, msg, at, s) }
	case err != nil:
		msg := callErrorText(err)
		apply = func(row *store.Task) { tasks.ApplyPollError(row, msg, at, s) }
	case reply.IsError:
		msg := tasks.ToolErrorFromContent(tool, reply.Content).Message
		apply = func(row *store.Task) { tasks.ApplyPollError(row, msg, at, s) }
	default:
		outcome, err := parseStatus(tool, t.RemoteTaskID, reply, s)
		if err != nil {
			apply = func(row *store.Task) { tasks.ApplyFailure(row, err.Error(), at, s) }
		} else {
			apply = func(row *store.Task) { tasks.ApplyPoll(row, outcome, at, s) }
		}
	}
	p.updateTask(ctx, st, t.ID, apply)
}

// parseStatus validates a status reply and applies the size caps; every
// error it returns is a permanent protocol error.
func parseStatus(tool, remoteID string, reply bus.InternalCallReply, s tasks.Settings) (tasks.Outcome, error) {
	r, err := tasks.ParseStatus(tool, remoteID, reply.StructuredContent)
	if err != nil {
		return tasks.Outcome{}, err
	}
	return tasks.Normalize(r, s)
}
