package taskpoller

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// remoteCall is what differs between a status poll and a cancel: the tool
// role, how a reply is read, and which transition each outcome applies.
type remoteCall struct {
	role  string
	parse func(tool, remoteID string, sc json.RawMessage) (tasks.StatusReply, error)
	// ok applies a valid reply; retry a transient failure; invalid a reply
	// that breaks the protocol (permanent for a poll, retried for a cancel).
	ok      func(*store.Task, tasks.Outcome, time.Time, tasks.Settings) bool
	retry   func(*store.Task, string, time.Time, tasks.Settings) bool
	invalid func(*store.Task, string, time.Time, tasks.Settings) bool
}

var (
	statusCall = remoteCall{role: tasks.RoleStatus, parse: tasks.ParseStatus,
		ok: tasks.ApplyPoll, retry: tasks.ApplyPollError, invalid: tasks.ApplyFailure}
	cancelCall = remoteCall{role: tasks.RoleCancel, parse: tasks.ParseCancel,
		ok: tasks.ApplyCancel, retry: tasks.ApplyCancelError, invalid: tasks.ApplyCancelError}
)

// callAndApply makes a task toolset's call for a claimed row and applies
// its outcome under the lease. Outcomes are timed from when the call
// completed (the base of the next poll or backoff). An unresolvable task
// handle fails the task, even a cancel; a missing driver role is a
// protocol error.
func (p *poller) callAndApply(ctx context.Context, st *passStats, t store.Task, rc remoteCall) {
	s := p.settings()
	start := p.clock()
	tool, err := tasks.ToolFor(t.DriverData, rc.role)
	if err != nil {
		p.updateTask(ctx, st, t.ID, func(row *store.Task) { rc.invalid(row, err.Error(), start, s) })
		return
	}
	reply, err := p.callTool(ctx, &t, tool)
	at := p.clock()
	if err != nil && abandoned(ctx, err) { // stopping, or no lease left for the call
		p.releaseLease(ctx, st, t.ID)
		return
	}
	var apply func(*store.Task)
	result := "ok"
	switch {
	case err != nil && bus.IsPermanentCallError(err):
		msg := callErrorText(err)
		apply = func(row *store.Task) { tasks.ApplyFailure(row, msg, at, s) }
	case err != nil:
		msg := callErrorText(err)
		apply = func(row *store.Task) { rc.retry(row, msg, at, s) }
	case reply.IsError:
		result = "tool_error"
		msg := tasks.ToolErrorFromContent(tool, reply.Content).Message
		apply = func(row *store.Task) { rc.retry(row, msg, at, s) }
	default:
		outcome, err := normalize(rc, tool, t.RemoteTaskID, reply, s)
		if err != nil {
			result = "invalid"
			apply = func(row *store.Task) { rc.invalid(row, err.Error(), at, s) }
		} else {
			apply = func(row *store.Task) { rc.ok(row, outcome, at, s) }
		}
	}
	p.countCall(rc, err, result)
	p.storeCounted(ctx, st, t.ID, apply)
}

// normalize reads a reply and applies the size caps.
func normalize(rc remoteCall, tool, remoteID string, reply bus.InternalCallReply, s tasks.Settings) (tasks.Outcome, error) {
	r, err := rc.parse(tool, remoteID, reply.StructuredContent)
	if err != nil {
		return tasks.Outcome{}, err
	}
	return tasks.Normalize(r, s)
}
