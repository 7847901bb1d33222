package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Native MCP tasks (2025-11-25 basic/utilities/tasks): a task-augmented
// tools/call answers with a CreateTaskResult; tasks/get, tasks/result and
// tasks/cancel then address the task by its id. The results are returned
// as the server sent them; package tasks reads them.

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

// CallToolTask sends a task-augmented tools/call (params.task with ttl,
// when ttl > 0) and returns the raw CreateTaskResult ({"task": {...}}).
// Headers, tracing and cancellation are as for [Client.CallTool]; no
// progress is asked for (the call returns at once). A JSON-RPC error is an
// *RPCError in the chain.
func (c *Client) CallToolTask(ctx context.Context, name string, args json.RawMessage, headers map[string]string, ttl time.Duration) (json.RawMessage, error) {
	task := &taskParams{}
	if ttl > 0 {
		ms := ttl.Milliseconds()
		task.TTL = &ms
	}
	return c.callTool(ctx, name, args, headers, task)
}

// TaskRequest sends tasks/get, tasks/result or tasks/cancel for taskID and
// returns the raw result: a Task for get and cancel, the underlying
// CallToolResult for result (which blocks until the task is terminal).
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
	if len(headers) > 0 && c.kind != TransportStdio {
		// Checked where they were assembled (as for CallTool).
		ctx = withRequestHeaders(ctx, headers)
	}
	raw, err := c.rawRequest(ctx, method, map[string]any{"taskId": taskID})
	if err != nil {
		return nil, c.wrapCtx(ctx, op, err, headerValues(headers))
	}
	return raw, nil
}
