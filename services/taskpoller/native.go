package taskpoller

import (
	"context"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// Native MCP tasks (driver "native", package tasks native.go): the row's
// remote id is the upstream's MCP task id and the poller uses the
// upstream's own task API through the toolcall service
// (mcpbus.internal.call with Method set), under the same lease, backoff
// and caps as a toolset's status and cancel calls:
//
//   - poll: tasks/get. A task still working or input_required is stored
//     with the next poll after the upstream's pollInterval (else the poll
//     interval), never after its ttl ends; once terminal, tasks/result is
//     fetched in the same lease and the CallToolResult stored. A task the
//     upstream no longer knows (-32602) fails; so does one whose ttl ended
//     while it was unfinished.
//   - cancel: tasks/cancel, storing the cancelled task. A -32602 (already
//     terminal, or unknown) is followed by tasks/get: a terminal task is
//     stored as it ended, an unknown one fails. Other failures retry with
//     backoff, forever.

// nativeCall makes one internal call of a task method for row t.
func (p *poller) nativeCall(ctx context.Context, t *store.Task, method string) (bus.InternalCallReply, error) {
	d := tasks.NativeDataOf(t.DriverData)
	timeout, err := p.callTimeout(ctx, t)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	if err := p.connected(); err != nil {
		return bus.InternalCallReply{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return bus.Request[bus.InternalCallReply](cctx, p.nc, p.s.deps.Names.InternalCall(), bus.InternalCallRequest{
		Server: t.ServerName, Method: method, TaskID: t.RemoteTaskID, Call: bus.Call{Tool: d.Tool, UserID: t.UserID, ThreadID: t.ThreadID, TimeoutMS: timeout.Milliseconds()},
	})
}

// nativeOutcome is what a native poll or cancel decided for the row.
type nativeOutcome struct {
	apply  func(*store.Task)
	result string // for the poll metrics: ok, invalid, rpc_error
	err    error  // a failed call (counted by code)
}

// pollNative makes a native poll for a claimed row and applies it.
func (p *poller) pollNative(ctx context.Context, st *passStats, t store.Task) {
	o, stopping := p.nativeStep(ctx, &t, false)
	if stopping {
		p.releaseLease(ctx, st, t.ID)
		return
	}
	p.countCall(statusCall, o.err, o.result)
	p.storeCounted(ctx, st, t.ID, o.apply)
}

// cancelNative makes a native cancel for a claimed cancel request.
func (p *poller) cancelNative(ctx context.Context, st *passStats, t store.Task) {
	o, stopping := p.nativeStep(ctx, &t, true)
	if stopping {
		p.releaseLease(ctx, st, t.ID)
		return
	}
	p.storeCounted(ctx, st, t.ID, o.apply)
}

// nativeStep runs the calls of a poll (cancel false) or a cancel and
// returns the transition to apply; stopping reports that the service is
// stopping and a call was cancelled.
func (p *poller) nativeStep(ctx context.Context, t *store.Task, cancel bool) (o nativeOutcome, stopping bool) {
	s := p.settings()
	d := tasks.NativeDataOf(t.DriverData)
	tool := d.Tool
	// Every call of the step (up to two) fits in the lease; ctx itself
	// ending means the service is stopping.
	callCtx, cancelCalls := leaseDeadline(ctx, p.cfg.Lease)
	defer cancelCalls()
	retry, invalid := tasks.ApplyPollError, tasks.ApplyFailure
	if cancel {
		retry, invalid = tasks.ApplyCancelError, tasks.ApplyCancelError
	}
	fail := func(at time.Time, msg string) nativeOutcome {
		return nativeOutcome{result: "invalid", apply: func(row *store.Task) { tasks.ApplyFailure(row, msg, at, s) }}
	}
	callFailed := func(at time.Time, err error) nativeOutcome {
		msg := callErrorText(err)
		if bus.IsPermanentCallError(err) {
			return nativeOutcome{err: err, apply: func(row *store.Task) { tasks.ApplyFailure(row, msg, at, s) }}
		}
		return nativeOutcome{err: err, apply: func(row *store.Task) { retry(row, msg, at, s) }}
	}

	method := bus.MethodTasksGet
	if cancel {
		method = bus.MethodTasksCancel
	}
	reply, err := p.nativeCall(callCtx, t, method)
	at := p.clock()
	if err != nil && abandoned(ctx, err) {
		return nativeOutcome{}, true
	}
	if err != nil {
		return callFailed(at, err), false
	}
	if cancel && reply.RPCError != nil && reply.RPCError.Code == bus.RPCCodeInvalidParams {
		// Already terminal, or unknown: ask what became of it.
		if reply, err = p.nativeCall(callCtx, t, bus.MethodTasksGet); err != nil {
			if abandoned(ctx, err) {
				return nativeOutcome{}, true
			}
			return callFailed(p.clock(), err), false
		}
		at = p.clock()
	}
	if rpc := reply.RPCError; rpc != nil {
		if rpc.Code == bus.RPCCodeInvalidParams {
			msg := tasks.NativeNotFound
			if d.Expired(at) && d.TTLMS != nil {
				msg = tasks.NativeExpiredError(*d.TTLMS)
			}
			return fail(at, msg), false
		}
		msg := "MCP task request " + method + " failed: " + rpc.Message
		return nativeOutcome{result: "rpc_error", apply: func(row *store.Task) { retry(row, msg, at, s) }}, false
	}
	task, err := tasks.ParseNativeTask(tool, t.RemoteTaskID, reply.Result)
	if err != nil {
		msg := err.Error()
		return nativeOutcome{result: "invalid", apply: func(row *store.Task) { invalid(row, msg, at, s) }}, false
	}
	if !task.Terminal() {
		if cancel {
			msg := "MCP task cancellation must return a terminal status"
			return nativeOutcome{result: "invalid", apply: func(row *store.Task) { retry(row, msg, at, s) }}, false
		}
		if d.Expired(at) && d.TTLMS != nil {
			return fail(at, tasks.NativeExpiredError(*d.TTLMS)), false
		}
		out, err := tasks.NativePending(task)
		if err != nil {
			return fail(at, err.Error()), false
		}
		d.PollIntervalMS = task.PollInterval.Milliseconds()
		dd := d.Marshal()
		return nativeOutcome{result: "ok", apply: func(row *store.Task) {
			if tasks.ApplyPoll(row, out, at, s) {
				row.DriverData = dd
				row.NextPollAt = d.CapAtExpiry(row.NextPollAt)
			}
		}}, false
	}
	// Terminal: fetch the result of a completed or failed task.
	var result []byte
	rpcMsg := ""
	if task.Status != tasks.NativeCancelled {
		res, err := p.nativeCall(callCtx, t, bus.MethodTasksResult)
		at = p.clock()
		if err != nil {
			if abandoned(ctx, err) {
				return nativeOutcome{}, true
			}
			return callFailed(at, err), false
		}
		if res.RPCError != nil {
			if task.Status == tasks.NativeCompleted {
				// A completed task must have its result: try again.
				msg := "MCP task request tasks/result failed: " + res.RPCError.Message
				return nativeOutcome{result: "rpc_error", apply: func(row *store.Task) { retry(row, msg, at, s) }}, false
			}
			rpcMsg = res.RPCError.Message
		} else {
			result = res.Result
		}
	}
	out, err := tasks.NativeFinal(tool, task, result, rpcMsg, s)
	if err != nil {
		msg := err.Error()
		return nativeOutcome{result: "invalid", apply: func(row *store.Task) { invalid(row, msg, at, s) }}, false
	}
	if cancel {
		return nativeOutcome{result: "ok", apply: func(row *store.Task) { tasks.ApplyCancel(row, out, at, s) }}, false
	}
	return nativeOutcome{result: "ok", apply: func(row *store.Task) { tasks.ApplyPoll(row, out, at, s) }}, false
}
