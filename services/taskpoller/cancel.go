package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// cancel makes the remote cancel call for a claimed cancel request and
// stores the terminal status the server reports. Any failure (a transport
// error, isError, an invalid or non-terminal reply) schedules another
// attempt with backoff, forever; only an unresolvable task handle fails the
// task.
func (p *poller) cancel(ctx context.Context, st *passStats, t store.Task) {
	s := p.settings()
	start := p.clock()
	if t.DriverName != tasks.DriverStructured {
		msg := tasks.UnknownDriverError(t.DriverName).Error()
		p.updateTask(ctx, st, t.ID, func(row *store.Task) { tasks.ApplyCancelError(row, msg, start, s) })
		return
	}
	tool, err := tasks.ToolFor(t.DriverData, tasks.RoleCancel)
	if err != nil {
		p.updateTask(ctx, st, t.ID, func(row *store.Task) { tasks.ApplyCancelError(row, err.Error(), start, s) })
		return
	}
	reply, err := p.callTool(ctx, &t, tool)
	at := p.clock()
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
		apply = func(row *store.Task) { tasks.ApplyCancelError(row, msg, at, s) }
	case reply.IsError:
		msg := tasks.ToolErrorFromContent(tool, reply.Content).Message
		apply = func(row *store.Task) { tasks.ApplyCancelError(row, msg, at, s) }
	default:
		outcome, err := parseCancel(tool, t.RemoteTaskID, reply, s)
		if err != nil {
			apply = func(row *store.Task) { tasks.ApplyCancelError(row, err.Error(), at, s) }
		} else {
			apply = func(row *store.Task) { tasks.ApplyCancel(row, outcome, at, s) }
		}
	}
	p.updateTask(ctx, st, t.ID, apply)
}

func parseCancel(tool, remoteID string, reply bus.InternalCallReply, s tasks.Settings) (tasks.Outcome, error) {
	r, err := tasks.ParseCancel(tool, remoteID, reply.StructuredContent)
	if err != nil {
		return tasks.Outcome{}, err
	}
	return tasks.Normalize(r, s)
}
