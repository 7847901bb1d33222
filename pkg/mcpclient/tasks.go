package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Native MCP tasks, in the session's era:
//
//   - legacy (2025-11-25 basic/utilities/tasks): a task-augmented
//     tools/call (params.task) answers with a CreateTaskResult
//     ({"task": Task}); tasks/get, tasks/result and tasks/cancel then
//     address the task by its id.
//   - modern (2026-07-28, the io.modelcontextprotocol/tasks extension):
//     a tools/call declaring the extension in its client capabilities
//     answers with a CreateTaskResult (resultType "task", the Task flat in
//     the result) or, the server's choice, with the CallToolResult at once.
//     Every task method declares the extension and sends Mcp-Name: taskId.
//     The extension has no tasks/result (tasks/get inlines a terminal
//     task's result or error) and acknowledges tasks/cancel without the
//     task, so TaskRequest maps both onto the legacy meaning (below).
//
// The results are returned as the server sent them; package tasks reads
// them.

// TasksExtension is the 2026-07-28 tasks extension's identifier.
const TasksExtension = bus.MCPTasksExtension

// withTasksExtension is in with the tasks extension declared in its
// client capabilities (merged into the caller's): a modern task
// request's.
func withTasksExtension(in CallInput) CallInput {
	caps := map[string]json.RawMessage{}
	if isObject(in.Capabilities) {
		_ = json.Unmarshal(in.Capabilities, &caps)
	}
	exts := map[string]json.RawMessage{}
	if raw := caps["extensions"]; isObject(raw) {
		_ = json.Unmarshal(raw, &exts)
	}
	exts[TasksExtension] = json.RawMessage(`{}`)
	caps["extensions"], _ = json.Marshal(exts)
	in.Capabilities, _ = json.Marshal(caps)
	return in
}

// taskHeaderName is the Mcp-Name of a task method (its params.taskId),
// which mcp-go's StandardHeaders does not know.
func taskHeaderName(method string, params []byte) (string, bool) {
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return "", false
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(params, &p) != nil || p.TaskID == "" {
		return "", false
	}
	return mcp.EncodeHeaderValue(p.TaskID)
}

// RPCError is a JSON-RPC error the server answered with. It unwraps to
// mcp-go's sentinel for the code (errors.Is(err, mcp.ErrInvalidParams)).
type RPCError struct {
	Code    int
	Message string
	err     error
}

func (e *RPCError) Error() string { return fmt.Sprintf("%v (JSON-RPC error %d)", e.err, e.Code) }

// Unwrap returns the sentinel of the code.
func (e *RPCError) Unwrap() error { return e.err }

// taskParams is tools/call's params.task.
type taskParams struct {
	TTL *int64 `json:"ttl,omitempty"`
}

// CallToolTask sends a task-augmented tools/call and returns the raw
// result: in the legacy era params.task (with ttl, when ttl > 0) and the
// CreateTaskResult ({"task": {...}}); in the modern era the tasks
// extension declared (the extension has no ttl request: the server
// chooses) and either the flat CreateTaskResult (resultType "task") or a
// CallToolResult (see [ParseCallResult]). Headers, tracing and
// cancellation are as for [Client.CallTool]; no progress is asked for. A
// JSON-RPC error is an *RPCError in the chain.
func (c *Client) CallToolTask(ctx context.Context, name string, args json.RawMessage, o *CallOptions, ttl time.Duration) (json.RawMessage, error) {
	if c.modern {
		mo := CallOptions{}
		if o != nil {
			mo = *o
		}
		mo.Input = withTasksExtension(mo.Input)
		return c.callTool(ctx, name, args, &mo, nil)
	}
	task := &taskParams{}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		task.TTL = &ms
	}
	return c.callTool(ctx, name, args, o, task)
}

// IsCreateTask reports whether a task-augmented call's raw result is a
// CreateTaskResult (either era's) rather than a CallToolResult.
func IsCreateTask(raw json.RawMessage) bool {
	var r struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
	}
	return json.Unmarshal(raw, &r) == nil && (r.ResultType == "task" || len(r.Task) > 0 && r.Task[0] == '{')
}

// ParseCallResult reads a raw CallToolResult as [Client.CallTool] returns
// it (the modern era's serverInfo _meta dropped).
func ParseCallResult(raw json.RawMessage) (*CallResult, error) {
	out, err := parseCallResult(raw)
	if err != nil {
		return nil, err
	}
	out.Meta = withoutServerInfo(out.Meta)
	return out, nil
}

// TaskRequest sends tasks/get, tasks/result or tasks/cancel for taskID and
// returns the raw result: a Task for get and cancel, the underlying
// CallToolResult for result (which blocks until the task is terminal). In
// the modern era tasks/result is a tasks/get whose inlined result is
// returned (its inlined error is an *RPCError; a task that is not
// terminal yet an error), and tasks/cancel is the extension's
// acknowledged cancel followed by a tasks/get, whose task is returned.
// headers are HTTP headers of this request only (ignored for stdio, whose
// task methods carry no _meta). A JSON-RPC error is an *RPCError in the
// chain.
func (c *Client) TaskRequest(ctx context.Context, method, taskID string, headers map[string]string) (json.RawMessage, error) {
	op := method + " " + strconv.Quote(taskID)
	if c.closed.Load() {
		return nil, c.wrap(op, ErrClosed, headerValues(headers))
	}
	switch method {
	case "tasks/get", "tasks/result", "tasks/cancel":
	default:
		return nil, c.wrap(op, errors.New("not a task method"), nil)
	}
	if taskID == "" {
		return nil, c.wrap(op, errors.New("task id is required"), nil)
	}
	var httpHeaders map[string]string
	if c.kind != TransportStdio {
		// Checked where they were assembled (as for CallTool).
		httpHeaders = headers
	}
	x := exchangeFor(nil, httpHeaders)
	if c.modern {
		x.caps = withTasksExtension(CallInput{}).Capabilities
	}
	ctx = withExchange(ctx, x)
	if c.modern {
		return c.modernTaskRequest(ctx, op, method, taskID, headers)
	}
	raw, err := c.rawRequest(ctx, method, map[string]any{"taskId": taskID})
	if err != nil {
		return nil, c.wrapCtx(ctx, op, err, headerValues(headers))
	}
	return raw, nil
}

// modernTaskRequest is TaskRequest in the modern era.
func (c *Client) modernTaskRequest(ctx context.Context, op, method, taskID string, headers map[string]string) (json.RawMessage, error) {
	params := map[string]any{"taskId": taskID}
	send := func(method string) (json.RawMessage, error) {
		raw, err := c.rawRequest(ctx, method, params)
		if err != nil {
			return nil, c.wrapCtx(ctx, op, err, headerValues(headers))
		}
		return raw, nil
	}
	switch method {
	case "tasks/cancel":
		if _, err := send("tasks/cancel"); err != nil {
			return nil, err
		}
		return send("tasks/get")
	case "tasks/result":
		raw, err := send("tasks/get")
		if err != nil {
			return nil, err
		}
		var t struct {
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, c.wrap(op, fmt.Errorf("decoding tasks/get result: %w", err), nil)
		}
		switch {
		case len(t.Result) > 0 && t.Result[0] == '{':
			return t.Result, nil
		case t.Error != nil:
			return nil, c.wrap(op, &RPCError{Code: t.Error.Code, Message: t.Error.Message, err: errors.New(t.Error.Message)}, nil)
		}
		return nil, c.wrap(op, fmt.Errorf("the task has no result (status %q)", t.Status), nil)
	}
	return send(method)
}
