package toolcall

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// Native MCP tasks (package tasks, native.go), in the upstream session's
// era (mcpclient: 2025-11-25's task methods, or the 2026-07-28 tasks
// extension, where the server may also answer the call at once, passed
// on as a plain result). An upstream tool whose
// catalog entry has execution.taskSupport "required" is always called
// task-augmented; one with "optional" only when the caller asks for a task
// (bus.Call.Task), otherwise as a plain call. The upstream's
// CreateTaskResult becomes a row in mcp_tasks (driver "native") and the
// caller gets the same handle as a toolset submit. The task poller then
// sends the upstream's tasks/get, tasks/result and tasks/cancel through
// mcpbus.internal.call with Method set.
//
// Every native request runs the ordinary pipeline (chain, route, hand-over
// to the stdio session's owner): only the invoke step differs, choosing
// the mcpclient method from the upcall's nativeOp. A JSON-RPC
// error answered to a task method is the reply's RPCError, not a failed
// call: the session stays (a stdio process holds the upstream's tasks).

// nativeOp is one native task request: a task-augmented tools/call
// (Method "tools/call") or a task method for TaskID. The call's upcall
// carries it to the invoke step and, for a call handed over,
// stdioCallRequest does; the step stores the upstream's answer in it.
type nativeOp struct {
	Method string `json:"method"`
	TaskID string `json:"task_id,omitempty"`
	TTLMS  int64  `json:"ttl_ms,omitempty"`

	result   json.RawMessage
	rpcError *bus.RPCError
}

// methodCreateTask is the nativeOp of a task-augmented tools/call.
const methodCreateTask = "tools/call"

// nativeTaskOp returns the nativeOp a public call of tool needs, or nil
// for a plain call. A task toolset's tools never are native. A task-only
// tool called by a caller that cannot take a task is refused
// (CodeClientCapabilityMissing naming the tasks extension).
func nativeTaskOp(tool bus.Tool, isTaskTool bool, req bus.Call) (*nativeOp, error) {
	if isTaskTool {
		return nil, nil
	}
	switch tool.TaskSupport() {
	case bus.TaskSupportRequired:
		if req.Taskless {
			return nil, bus.MissingCapability(tool.Server, map[string]any{"extensions": map[string]any{bus.MCPTasksExtension: map[string]any{}}},
				fmt.Sprintf("tool '%s' of server '%s' runs only as a task (execution.taskSupport required): declare the %s extension to call it", req.Tool, tool.Server, bus.MCPTasksExtension))
		}
	case bus.TaskSupportOptional:
		if req.Task == nil {
			return nil, nil
		}
	default:
		return nil, nil
	}
	ttl := tasks.DefaultNativeTTL.Milliseconds()
	if req.Task != nil && req.Task.TTLMS > 0 {
		ttl = req.Task.TTLMS
	}
	return &nativeOp{Method: methodCreateTask, TTLMS: ttl}, nil
}

// callSession is the invoke step's call on a pooled session: a plain
// tools/call, or u's native or federation request.
func callSession(ctx context.Context, c *mcpclient.Client, u *upcall, r *interceptors.Request, headers map[string]string) (*mcpclient.CallResult, error) {
	opts := u.opts
	opts.Headers = headers
	if u.fed != nil {
		return callFed(ctx, c, u.fed, &opts)
	}
	op := u.native
	if op == nil {
		return c.CallTool(ctx, r.Tool, r.Arguments, &opts)
	}
	// mcpclient speaks the session's era: 2025-11-25's task methods, or
	// the 2026-07-28 tasks extension.
	var (
		raw json.RawMessage
		err error
	)
	if op.Method == methodCreateTask {
		raw, err = c.CallToolTask(ctx, r.Tool, r.Arguments, &opts, time.Duration(op.TTLMS)*time.Millisecond)
		if err == nil && !mcpclient.IsCreateTask(raw) {
			// The server answered at once (the tasks extension lets it
			// choose): an ordinary result (submitNative passes it on).
			res, perr := mcpclient.ParseCallResult(raw)
			if perr != nil {
				return nil, perr
			}
			op.result = raw
			return res, nil
		}
	} else {
		raw, err = c.TaskRequest(ctx, op.Method, op.TaskID, headers)
	}
	var rpc *mcpclient.RPCError
	if op.Method != methodCreateTask && errors.As(err, &rpc) {
		op.rpcError = &bus.RPCError{Code: rpc.Code, Message: rpc.Message}
		return &mcpclient.CallResult{Content: []json.RawMessage{}}, nil
	}
	if err != nil {
		return nil, err
	}
	op.result = raw
	return &mcpclient.CallResult{Content: []json.RawMessage{}}, nil
}

// nativeKeepsSession reports a task method that timed out: its session
// stays, since it may hold the upstream's tasks (a stdio process does; so
// does an HTTP session of a server that binds tasks to it). The poller
// retries with backoff; a session that died is dropped as usual.
func nativeKeepsSession(u *upcall, err error, timedOut bool) bool {
	op := u.native
	return op != nil && op.Method != methodCreateTask && (timedOut || errors.Is(err, context.DeadlineExceeded)) &&
		!errors.Is(err, mcpclient.ErrConnectionLost) && !errors.Is(err, mcpclient.ErrSessionExpired) && !errors.Is(err, mcpclient.ErrClosed)
}

// handOverNative copies a handed-over call's answer into u's op.
func handOverNative(u *upcall, reply bus.InternalCallReply) {
	if op := u.native; op != nil {
		op.result, op.rpcError = reply.Result, reply.RPCError
	}
	if op := u.fed; op != nil {
		op.result, op.rpcError = reply.Result, reply.RPCError
	}
}

// nativeReply is the reply of a native request run on this replica.
func nativeReply(u *upcall, res *interceptors.Result) bus.InternalCallReply {
	reply := internalReply(res)
	if op := u.native; op != nil {
		reply.Result, reply.RPCError = op.result, op.rpcError
	}
	if op := u.fed; op != nil {
		reply.Result, reply.RPCError = op.result, op.rpcError
	}
	return reply
}

// internalNativeOp is the nativeOp of an internal call with a task
// method, nil for a tool call.
func internalNativeOp(req bus.InternalCallRequest) (*nativeOp, error) {
	switch req.Method {
	case "":
		return nil, nil
	case bus.MethodTasksGet, bus.MethodTasksResult, bus.MethodTasksCancel:
		if req.TaskID == "" {
			return nil, bus.Errorf(bus.CodeInvalidRequest, "task_id is required for %s", req.Method)
		}
		return &nativeOp{Method: req.Method, TaskID: req.TaskID}, nil
	default:
		return nil, bus.Errorf(bus.CodeInvalidRequest, "unknown internal call method '%s'", req.Method)
	}
}

// submitNative turns the upstream's CreateTaskResult into a tracked task:
// it validates it, stores the row and returns the handle. The upstream's
// task id never leaves mcpbus. After the upstream created the task, any
// failure except a duplicate is followed by a best-effort tasks/cancel.
func (s *Service) submitNative(ctx context.Context, t target, tool bus.Tool, r *interceptors.Request, u *upcall,
	res *interceptors.Result, chain callChain) (bus.ToolsCallReply, error) {
	raw, op, req := tool.OriginalName, u.native, u.call
	if op.result == nil {
		// An interceptor answered in the upstream's place: no task was
		// created.
		if res.IsError {
			te := tasks.ToolErrorFromContent(raw, res.Content)
			return bus.ToolsCallReply{}, bus.WrapUser(bus.CodeUpstreamError, te, te.Message)
		}
		return bus.ToolsCallReply{}, bus.Errorf(bus.CodeUpstreamError, "MCP tool '%s' did not create a task", raw)
	}
	if !mcpclient.IsCreateTask(op.result) {
		// Answered at once (a 2026-07-28 server's choice): no task.
		return plainReply(u, t, res), nil
	}
	task, err := tasks.ParseCreateTask(raw, op.result)
	if err != nil {
		var named struct {
			TaskID string `json:"taskId"` // 2026-07-28: the Task is the result
			Task   struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		if json.Unmarshal(op.result, &named) == nil && cmp.Or(named.Task.TaskID, named.TaskID) != "" {
			s.cancelNativeUntracked(t, r, cmp.Or(named.Task.TaskID, named.TaskID), chain)
		}
		return bus.ToolsCallReply{}, bus.WrapUser(bus.CodeUpstreamError, err, fmt.Sprintf("MCP tool '%s' returned a task mcpbus cannot track", raw))
	}
	row, err := tasks.NewNativeTask(tasks.NativeSubmit{
		UserID: r.UserID, ThreadID: r.ThreadID, RunID: req.RunID, ToolCallID: req.ToolCallID,
		ServerName: t.srv.Name, Tool: raw, Traceparent: tracing.Traceparent(ctx), Task: task,
	}, s.deps.Clock().UTC(), tasks.SettingsFrom(s.cfg.MCPTasks))
	if err == nil {
		row.Namespace = s.deps.Names.Namespace() // only this deployment's pollers claim it
		row, err = s.deps.Tasks.InsertTask(ctx, store.InsertTaskParams{Task: *row})
		if errors.Is(err, store.ErrConflict) {
			return bus.ToolsCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "%s", tasks.DuplicateError(task.TaskID, t.srv.Name))
		}
	}
	if err != nil {
		s.cancelNativeUntracked(t, r, task.TaskID, chain)
		return bus.ToolsCallReply{}, untrackedError(err)
	}
	handle := tasks.Handle(row)
	text, _ := json.Marshal(handle)
	block, _ := json.Marshal(map[string]string{"type": "text", "text": string(text)})
	s.log.InfoContext(ctx, "durable native task submitted", observability.Server(t.srv.Name), "task_id", row.ID, "task_name", row.TaskName)
	return bus.ToolsCallReply{Tool: req.Tool, Server: t.srv.Name, Content: []json.RawMessage{block}, Task: &handle}, nil
}

// cancelNativeUntracked sends the best-effort tasks/cancel of an upstream
// task that could not be tracked; a failure is only logged.
func (s *Service) cancelNativeUntracked(t target, r *interceptors.Request, remoteID string, chain callChain) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout(t.srv))
	defer cancel()
	op := &nativeOp{Method: bus.MethodTasksCancel, TaskID: remoteID}
	cr := *r
	_, err := chain.run(ctx, &upcall{note: &callNote{}, native: op}, &cr)
	if err == nil && op.rpcError != nil {
		err = errors.New(op.rpcError.Message)
	}
	if err != nil {
		s.log.Warn("Failed to cancel untracked MCP task", observability.Server(t.srv.Name), "task_name", r.Tool, observability.Err(err))
	}
}
