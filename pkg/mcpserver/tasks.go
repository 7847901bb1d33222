package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// MCP tasks (2025-11-25, basic/utilities/tasks) over mcpbus's durable task
// runtime: a task-augmented tools/call of a task-toolset submit tool makes
// the durable task a plain call makes (mcpbus.tools.call), and answers with
// a CreateTaskResult whose taskId is mcpbus's task id; tasks/get,
// tasks/result, tasks/list and tasks/cancel go to the task API the task
// poller serves (mcpbus.tasks.get, .list, .cancel), so any api replica
// answers for any task and the poller's ownership rule applies: a task is
// the caller's user's in the caller's thread, anything else is an unknown
// task. tasks/result and tasks/cancel wait for a terminal status by
// re-reading the task whenever the thread's task event arrives
// (mcpbus.events.tasks.<thread>), and at a bounded interval in between (an
// event is only published for some transitions).

// relatedTaskKey is the _meta key naming a message's task.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// Task polling: the interval clients are told (pollInterval), and the
// bounds of the re-read while mcpbus waits for a terminal status.
const (
	taskPollIntervalMS = 2000
	taskWaitMin        = 250 * time.Millisecond
	taskWaitMax        = 3 * time.Second
	// taskCancelWait bounds how long tasks/cancel waits for the remote
	// cancel to land before it answers with the status then.
	taskCancelWait = 30 * time.Second
)

// tasksCapability is the server's tasks capability (2025-11-25 sessions).
var tasksCapability = map[string]any{
	"list": map[string]any{}, "cancel": map[string]any{},
	"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
}

// taskSessions reports whether x's session speaks MCP tasks (2025-11-25):
// older sessions were not offered the capability, so their task field is
// ignored as the spec says.
func taskSessions(x *Exchange) bool {
	return x.Session != nil && x.Session.ProtocolVersion == Version20251125
}

// taskCapable reports a catalog tool a client may call as a task: a
// task-toolset submit tool, or an upstream tool with native MCP task
// support (execution.taskSupport required or optional), which toolcall
// calls task-augmented and tracks as a durable task.
func taskCapable(t bus.Tool) bool {
	return t.TaskToolset != "" || t.TaskSupport() != bus.TaskSupportForbidden
}

// toolExecution is a tool's execution block in tools/list.
type toolExecution struct {
	TaskSupport string `json:"taskSupport"`
}

// executionOf is t's execution block for x: in task sessions (and for a
// 2026-07-28 request declaring the tasks extension, which has no
// per-tool field of its own: the block says which tools may answer with a
// task), the
// upstream's own task support for a tool that has it ("required" stays
// required: mcpbus calls it only as a task) and "optional" for a task
// toolset's submit tool; none otherwise (a plain call of any of them
// answers with the durable task's handle).
func executionOf(x *Exchange, t bus.Tool) *toolExecution {
	if !(taskSessions(x) || x.tasksExtension) || !taskCapable(t) {
		return nil
	}
	if t.TaskToolset == "" && t.TaskSupport() == bus.TaskSupportRequired {
		return &toolExecution{TaskSupport: bus.TaskSupportRequired}
	}
	return &toolExecution{TaskSupport: "optional"}
}

// mcpTask is MCP's Task.
type mcpTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is null: mcpbus keeps tasks until an operator removes them.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// taskOf is MCP's view of a durable task (the statuses and messages:
// tasks.MCPStatus, tasks.MCPStatusMessage).
func taskOf(d bus.TaskItem) mcpTask {
	t := mcpTask{TaskID: d.TaskID, Status: tasks.MCPStatus(d.Status), StatusMessage: tasks.MCPStatusMessage(d),
		CreatedAt: d.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: d.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	if !store.IsTerminalStatus(d.Status) {
		t.PollInterval = taskPollIntervalMS
	}
	return t
}

type taskIDParams struct {
	TaskID string `json:"taskId"`
}

func parseTaskID(method string, params json.RawMessage) (string, *Error) {
	var p taskIDParams
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return "", Errorf(CodeInvalidParams, "%s params: %v", method, err)
	}
	if p.TaskID == "" {
		return "", Errorf(CodeInvalidParams, "%s params: taskId is required", method)
	}
	return p.TaskID, nil
}

// errTaskNotFound is the spec's error for an unknown task: also the answer
// for another user's or thread's task, so that nothing tells them apart.
func errTaskNotFound() *Error {
	return Errorf(CodeInvalidParams, "Failed to retrieve task: Task not found")
}

// taskRequest asks the task API about one of the caller's tasks.
func (s *Server) taskRequest(ctx context.Context, x *Exchange, subject, method, id string) (bus.TaskDetail, *Error) {
	bctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	d, err := bus.Request[bus.TaskDetail](bctx, s.deps.NC, subject, bus.TaskListRequest{UserID: x.UserID, ThreadID: x.Thread(), TaskID: id})
	if err == nil {
		return d, nil
	}
	if ctx.Err() != nil {
		return bus.TaskDetail{}, &Error{Code: CodeRequestCancelled, Message: method + ": cancelled"}
	}
	switch bus.AsError(err).Code {
	case bus.CodeNotFound:
		return bus.TaskDetail{}, errTaskNotFound()
	case bus.CodeInvalidRequest:
		// A thread id the task runtime refuses has no tasks.
		return bus.TaskDetail{}, errTaskNotFound()
	}
	return bus.TaskDetail{}, s.busError(err, method)
}

func (s *Server) getTask(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	id, rerr := parseTaskID("tasks/get", params)
	if rerr != nil {
		return nil, rerr
	}
	d, rerr := s.taskRequest(ctx, x, s.deps.Names.TasksGet(), "tasks/get", id)
	if rerr != nil {
		return nil, rerr
	}
	return taskOf(d.TaskItem), nil
}

// waitTerminal re-reads the task until it is terminal, the wait ends
// (ctx) or limit passes (0: no limit); it returns the last detail read.
func (s *Server) waitTerminal(ctx context.Context, x *Exchange, method, id string, limit time.Duration) (bus.TaskDetail, *Error) {
	// Subscribe before the first read, so an event between the read and
	// the wait is not lost.
	events := make(chan *nats.Msg, 16)
	sub, err := s.deps.NC.ChanSubscribe(s.deps.Names.TaskEvents(x.Thread()), events)
	if err != nil {
		s.log.Warn("task events not subscribed; polling the task only", observability.Err(err))
	} else {
		defer func() { _ = sub.Unsubscribe() }()
	}
	var deadline <-chan time.Time
	if limit > 0 {
		tm := time.NewTimer(limit)
		defer tm.Stop()
		deadline = tm.C
	}
	wait := taskWaitMin
	for {
		d, rerr := s.taskRequest(ctx, x, s.deps.Names.TasksGet(), method, id)
		if rerr != nil || store.IsTerminalStatus(d.Status) {
			return d, rerr
		}
		tm := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				tm.Stop()
				return d, &Error{Code: CodeRequestCancelled, Message: method + ": cancelled"}
			case <-deadline:
				tm.Stop()
				return s.taskRequest(ctx, x, s.deps.Names.TasksGet(), method, id)
			case m := <-events:
				var ev struct {
					TaskID string `json:"task_id"`
				}
				if json.Unmarshal(m.Data, &ev) == nil && ev.TaskID == id {
					tm.Stop()
					break waiting
				}
			case <-tm.C:
				wait = min(wait*2, taskWaitMax)
				break waiting
			}
		}
	}
}

// taskResult is tasks/result: the result the task's tool call stands for,
// once the task is terminal. A completed task's result is its structured
// result (and its JSON as text); a failed or cancelled task is a tool
// result with isError true saying so.
func (s *Server) taskResult(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	id, rerr := parseTaskID("tasks/result", params)
	if rerr != nil {
		return nil, rerr
	}
	d, rerr := s.waitTerminal(ctx, x, "tasks/result", id, 0)
	if rerr != nil {
		return nil, rerr
	}
	return resultOf(d), nil
}

// callTaskOf is the task a task-augmented call asks toolcall for: its ttl
// (an optional native task tool is then called as a task too).
func callTaskOf(raw json.RawMessage) *bus.CallTask {
	var p struct {
		TTL *float64 `json:"ttl"`
	}
	_ = json.Unmarshal(raw, &p)
	ct := &bus.CallTask{}
	if p.TTL != nil && *p.TTL > 0 {
		ct.TTLMS = int64(*p.TTL)
	}
	return ct
}

// nativeResultOf is the stored CallToolResult of a native task (its own
// _meta kept); ok is false when there is none.
func nativeResultOf(d bus.TaskDetail) (callResult, bool) {
	if d.ResultFormat != bus.ResultFormatCallToolResult || d.ResultTruncated || len(d.Result) == 0 {
		return callResult{}, false
	}
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              json.RawMessage   `json:"_meta"`
	}
	if json.Unmarshal(d.Result, &r) != nil || r.Content == nil {
		return callResult{}, false
	}
	res := callResult{Content: r.Content, IsError: r.IsError || d.Status == store.TaskStatusFailed}
	if len(r.Meta) > 0 && r.Meta[0] == '{' {
		res.Meta = r.Meta
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		res.StructuredContent = r.StructuredContent
	}
	return res, true
}

// resultOf is tasks/result's answer (2025-11-25): resultBody with the
// related-task _meta naming mcpbus's task.
func resultOf(d bus.TaskDetail) callResult {
	res := resultBody(d)
	meta := map[string]json.RawMessage{}
	if len(res.Meta) > 0 {
		_ = json.Unmarshal(res.Meta, &meta)
	}
	meta[relatedTaskKey] = mustJSON(map[string]string{"taskId": d.TaskID})
	res.Meta = mustJSON(meta)
	return res
}

// resultBody is the tool result a terminal task stands for, in both task
// protocols. A completed task's result is its structured result (and its
// JSON as text), or a native task's CallToolResult; a failed or cancelled
// task is a tool result with isError true saying so.
func resultBody(d bus.TaskDetail) callResult {
	if d.Status != store.TaskStatusCancelled {
		if res, ok := nativeResultOf(d); ok {
			return res
		}
	}
	text := func(s string) []json.RawMessage {
		return []json.RawMessage{mustJSON(map[string]string{"type": "text", "text": s})}
	}
	switch d.Status {
	case store.TaskStatusCompleted:
		res := callResult{}
		body := strings.TrimSpace(string(d.Result))
		switch {
		case d.ResultTruncated && d.ResultPreview != nil:
			res.Content = text(*d.ResultPreview + " (result truncated; the full result is an mcpbus artifact: " + string(d.ResultArtifact) + ")")
		case body != "" && body != "null":
			res.Content = text(body)
			if body[0] == '{' {
				res.StructuredContent = d.Result
			}
		default:
			res.Content = text("The task completed.")
		}
		return res
	case store.TaskStatusCancelled:
		return callResult{Content: text("The task was cancelled."), IsError: true}
	default:
		msg := "The task failed."
		if d.Error != nil && *d.Error != "" {
			msg = "The task failed: " + *d.Error
		}
		return callResult{Content: text(msg), IsError: true}
	}
}

// cancelTask is tasks/cancel: a terminal task is refused (-32602, as the
// spec says); otherwise the cancel is recorded, a poller cancels the task
// on its server, and the answer waits a bounded time for that to land.
func (s *Server) cancelTask(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	id, rerr := parseTaskID("tasks/cancel", params)
	if rerr != nil {
		return nil, rerr
	}
	d, rerr := s.requestCancel(ctx, x, "tasks/cancel", id)
	if rerr != nil {
		return nil, rerr
	}
	if store.IsTerminalStatus(d.Status) {
		return nil, Errorf(CodeInvalidParams, "Cannot cancel task: already in terminal status '%s'", d.Status)
	}
	d, rerr = s.waitTerminal(ctx, x, "tasks/cancel", id, taskCancelWait)
	if rerr != nil {
		return nil, rerr
	}
	return taskOf(d.TaskItem), nil
}

// requestCancel reads the caller's task id and, unless it is terminal,
// records its cancel (mcpbus.tasks.cancel: a poller then cancels it on
// its server). It returns the task as read before the cancel.
func (s *Server) requestCancel(ctx context.Context, x *Exchange, method, id string) (bus.TaskDetail, *Error) {
	d, rerr := s.taskRequest(ctx, x, s.deps.Names.TasksGet(), method, id)
	if rerr != nil || store.IsTerminalStatus(d.Status) {
		return d, rerr
	}
	_, rerr = s.taskRequest(ctx, x, s.deps.Names.TasksCancel(), method, id)
	return d, rerr
}

type listTasksResult struct {
	Tasks      []mcpTask `json:"tasks"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// Task-list cursors are opaque: a tag and the last task id of the page.
const taskCursorPrefix = "mcpbus-tasks1:"

// listTasks is tasks/list: the caller's tasks in the thread, newest first,
// PageSize (at most 100) at a time.
func (s *Server) listTasks(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if err := json.Unmarshal(orEmpty(params), &p); err != nil {
		return nil, Errorf(CodeInvalidParams, "tasks/list params: %v", err)
	}
	before := ""
	if p.Cursor != nil {
		raw, err := base64.RawURLEncoding.DecodeString(*p.Cursor)
		if err != nil || !strings.HasPrefix(string(raw), taskCursorPrefix) || len(raw) == len(taskCursorPrefix) {
			return nil, Errorf(CodeInvalidParams, "tasks/list params: cursor is not one this server issued; list again without a cursor")
		}
		before = string(raw[len(taskCursorPrefix):])
	}
	size := min(s.cfg.PageSize, 99)
	bctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	reply, err := bus.Request[bus.TaskListReply](bctx, s.deps.NC, s.deps.Names.TasksList(),
		bus.TaskListRequest{UserID: x.UserID, ThreadID: x.Thread(), Limit: size + 1, Before: before})
	if err != nil {
		if bus.AsError(err).Code == bus.CodeInvalidRequest {
			return listTasksResult{Tasks: []mcpTask{}}, nil
		}
		return nil, s.busError(err, "tasks/list")
	}
	res := listTasksResult{Tasks: []mcpTask{}}
	for i, t := range reply.Tasks {
		if i == size {
			res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(taskCursorPrefix + reply.Tasks[i-1].TaskID))
			break
		}
		res.Tasks = append(res.Tasks, taskOf(t))
	}
	return res, nil
}

// legacyCall is the legacy era's tools/call (initialize and sessions,
// 2024-11-05 to 2025-11-25; /mcp, /sse, stdio): a task-augmented call
// (params.task, in a 2025-11-25 session) is createTask, any other the
// plain call. m's params are the ones decoded for the request's checks.
func (s *Server) legacyCall(ctx context.Context, x *Exchange, m *Message) (any, *Error) {
	p, err := m.paramsOf()
	if err != nil {
		return nil, Errorf(CodeInvalidParams, "tools/call params: %v", err)
	}
	if !taskSessions(x) || len(p.Task) == 0 || string(p.Task) == "null" {
		return s.callDecoded(ctx, x, m.ID, p, nil, false)
	}
	return s.createTask(ctx, x, m.ID, p)
}

// createTask makes the durable task of a task-capable tool and answers with
// its CreateTaskResult. A tool that is not task-capable is method not found
// (the spec's answer for a tool whose taskSupport is forbidden); a refusal
// of the call is a JSON-RPC error, since the client waits for a task.
func (s *Server) createTask(ctx context.Context, x *Exchange, id json.RawMessage, p *callParams) (any, *Error) {
	if p.Task[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "tools/call params: task must be an object")
	}
	if p.Name == "" {
		return nil, Errorf(CodeInvalidParams, "tools/call params: name is required")
	}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" && p.Arguments[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "tools/call params: arguments must be an object")
	}
	cat, err := s.catalog(ctx, x)
	if err != nil {
		return nil, s.busError(err, "tools/call")
	}
	capable := false
	for _, t := range cat.Tools {
		if t.Name == p.Name {
			capable = taskCapable(t)
			break
		}
	}
	if !capable {
		return nil, Errorf(CodeMethodNotFound, "tool '%s' cannot be called as a task: call it without params.task (tools with execution.taskSupport can)", p.Name)
	}
	bctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	reply, err := bus.Request[bus.ToolsCallReply](bctx, s.deps.NC, s.deps.Names.ToolsCall(), bus.Call{
		Tool: p.Name, Arguments: p.Arguments, UserID: x.UserID, ThreadID: x.Thread(), Promoted: s.promoted(bctx, x),
		CallID: callID(x, id), Task: callTaskOf(p.Task), VirtualServer: x.VirtualServer,
	})
	if err != nil {
		if bus.AsError(err).Code == bus.CodeCancelled {
			return nil, &Error{Code: CodeRequestCancelled, Message: "tools/call: cancelled (notifications/cancelled)"}
		}
		if res, ok := refusal(err); ok {
			var text struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(res.Content[0], &text)
			return nil, &Error{Code: CodeInternalError, Message: text.Text, Data: mustJSON(map[string]string{"mcpbus_code": string(bus.AsError(err).Code)})}
		}
		return nil, s.busError(err, "tools/call")
	}
	d, rerr := s.madeTask(ctx, x, reply)
	if rerr != nil {
		return nil, rerr
	}
	return map[string]any{"task": taskOf(d.TaskItem), "_meta": map[string]any{
		immediateResponseKey: reply.Task.Message,
	}}, nil
}

// immediateResponseKey is the _meta key of a CreateTaskResult's message
// for the model.
const immediateResponseKey = "io.modelcontextprotocol/model-immediate-response"

// madeTask reads back the task a call made: the CreateTaskResult's seed
// state, read from the durable store, so a tasks/get for it resolves.
func (s *Server) madeTask(ctx context.Context, x *Exchange, reply bus.ToolsCallReply) (bus.TaskDetail, *Error) {
	if reply.Task == nil {
		return bus.TaskDetail{}, Errorf(CodeInternalError, "tools/call: the tool made no task")
	}
	return s.taskRequest(ctx, x, s.deps.Names.TasksGet(), "tools/call", reply.Task.TaskID)
}

// TaskStatus is the notifications/tasks/status a task event calls for: the
// task as tasks/get shows it to userID in threadID (read again, since the
// event lacks the task's times). ok is false when there is nothing to send:
// the task is not theirs, or it could not be read (logged).
func (s *Server) TaskStatus(ctx context.Context, userID, threadID, taskID string) (*Message, bool) {
	d, ok := s.notifiedTask(ctx, userID, threadID, taskID)
	if !ok {
		return nil, false
	}
	return Notification("notifications/tasks/status", taskOf(d.TaskItem)), true
}

// notifiedTask reads the task a task event names, as its owner (userID in
// threadID) sees it; ok is false when it is not theirs or cannot be read
// (logged).
func (s *Server) notifiedTask(ctx context.Context, userID, threadID, taskID string) (bus.TaskDetail, bool) {
	x := &Exchange{UserID: userID, ThreadHeader: threadID}
	d, rerr := s.taskRequest(ctx, x, s.deps.Names.TasksGet(), "task status notification", taskID)
	if rerr != nil {
		if rerr.Code != CodeInvalidParams {
			s.log.Warn("task not read for its status notification", "task_id", taskID, "error", rerr.Message)
		}
		return bus.TaskDetail{}, false
	}
	return d, true
}

// TaskSession reports whether sess is offered MCP tasks (notifications
// included): a 2025-11-25 session.
func TaskSession(sess *Session) bool { return taskSessions(&Exchange{Session: sess}) }
