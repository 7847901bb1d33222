package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// The 2026-07-28 tasks extension (io.modelcontextprotocol/tasks, SEP-2663)
// over the same durable task runtime as the 2025-11-25 task protocol
// (tasks.go). A modern request opts in per request, in
// params._meta["io.modelcontextprotocol/clientCapabilities"].extensions;
// server/discover advertises the extension. Task creation is the
// server's decision: a tools/call that declares the extension asks
// toolcall for a durable task (bus.Call.Task), and a call that
// made one (a task-toolset submit, an upstream tool with native task
// support) answers with a CreateTaskResult (resultType "task", the Task
// flat in the result); any other call answers as without the extension.
// tasks/get inlines a terminal task's result; tasks/update and
// tasks/cancel are acknowledgements; tasks/result and tasks/list do not
// exist in the extension (method not found). Without the extension
// declared, the task methods answer -32021. Ownership is the legacy one:
// the caller's user in the caller's thread (Mcpbus-Thread-Id, else
// "default"); anything else is the unknown-task error.

// TasksExtension is the tasks extension's identifier.
const TasksExtension = bus.MCPTasksExtension

// declaresTasks reports whether a modern request's client capabilities
// declare the tasks extension (an object under extensions).
func declaresTasks(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(TasksExtension)) {
		// The common case, without a decode (every modern tools/call asks).
		return false
	}
	caps := ClientCapabilities(params)
	if len(caps) == 0 {
		return false
	}
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	v := bytes.TrimSpace(c.Extensions[TasksExtension])
	return len(v) > 0 && v[0] == '{'
}

// extensionTask is the task a modern tools/call asks toolcall for: one
// when the request declares the extension, none otherwise.
func extensionTask(params json.RawMessage) *bus.CallTask {
	if declaresTasks(params) {
		return &bus.CallTask{}
	}
	return nil
}

// errTasksUndeclared is the extension's answer to a task method sent
// without the extension declared.
func errTasksUndeclared(method string) *Error {
	return errTaskRequired(method + " belongs to the " + TasksExtension + " extension")
}

// errTaskRequired is the missing-capability error (-32021) naming the
// extension; why says what needs it.
func errTaskRequired(why string) *Error {
	return MissingCapability(map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}},
		why+": declare it in params._meta[\""+MetaClientCapabilities+"\"].extensions[\""+TasksExtension+"\"]")
}

// extTask is the extension's Task, and its DetailedTask (tasks/get) with
// the status's own fields.
type extTask struct {
	ResultType    string `json:"resultType,omitempty"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMS is null: mcpbus keeps tasks until an operator removes them.
	TTLMS          *int64 `json:"ttlMs"`
	PollIntervalMS int64  `json:"pollIntervalMs,omitempty"`
	// InputRequests is {} for input_required: mcpbus relays no
	// server-to-client request of a task's server.
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
	// Result is the tool result of a terminal task (completed, and failed:
	// see detailedTask).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the JSON-RPC error of a failed task (see detailedTask).
	Error *Error         `json:"error,omitempty"`
	Meta  map[string]any `json:"_meta,omitempty"`
}

// extTaskOf is the extension's view of a durable task: taskOf's, with the
// extension's field names.
func extTaskOf(d bus.TaskItem) extTask {
	t := taskOf(d)
	return extTask{TaskID: t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage, CreatedAt: t.CreatedAt,
		LastUpdatedAt: t.LastUpdatedAt, TTLMS: t.TTL, PollIntervalMS: t.PollInterval}
}

// detailedTask is tasks/get's DetailedTask. A completed task inlines its
// tool result (resultBody, without the related-task _meta: the taskId is
// the result's own). A failed task is failed with an internal error or
// completed with an isError result saying why, as tasks.ExtensionError
// decides.
func detailedTask(d bus.TaskDetail) extTask {
	t := extTaskOf(d.TaskItem)
	switch d.Status {
	case store.TaskStatusFailed:
		if msg, ok := tasks.ExtensionError(d); ok {
			t.Error = &Error{Code: CodeInternalError, Message: msg}
			break
		}
		fallthrough
	case store.TaskStatusCompleted:
		t.Status = store.TaskStatusCompleted
		t.Result = resultBody(d).appendJSON(nil)
	case store.TaskStatusInputRequired:
		t.InputRequests = json.RawMessage(`{}`)
	}
	return t
}

// createdTask is a tools/call that made a durable task: the task as read
// back and the handle's message for the model.
type createdTask struct {
	detail  bus.TaskDetail
	message string
}

// result is its CreateTaskResult (resultType "task").
func (c createdTask) result() extTask {
	t := extTaskOf(c.detail.TaskItem)
	t.ResultType = "task"
	if c.message != "" {
		t.Meta = map[string]any{immediateResponseKey: c.message}
	}
	return t
}

// addTaskMethods adds the extension's methods to the modern table.
func (m *Modern) addTaskMethods() {
	m.methods["tasks/get"] = m.getTask
	m.methods["tasks/update"] = m.updateTask
	m.methods["tasks/cancel"] = m.cancelTask
	for _, removed := range []string{"tasks/result", "tasks/list"} {
		m.methods[removed] = func(context.Context, *Exchange, json.RawMessage) (any, *Error) {
			return nil, Errorf(CodeMethodNotFound, "method not found: %s is not part of the %s extension (tasks/get inlines a terminal task's result)", removed, TasksExtension)
		}
	}
}

// taskOfRequest checks a task method's request (the extension declared, a
// taskId) and reads the caller's task.
func (m *Modern) taskOfRequest(ctx context.Context, x *Exchange, method string, params json.RawMessage) (bus.TaskDetail, *Error) {
	if !declaresTasks(params) {
		return bus.TaskDetail{}, errTasksUndeclared(method)
	}
	id, rerr := parseTaskID(method, params)
	if rerr != nil {
		return bus.TaskDetail{}, rerr
	}
	return m.s.taskRequest(ctx, x, m.s.deps.Names.TasksGet(), method, id)
}

// getTask is tasks/get: the caller's task as a DetailedTask.
func (m *Modern) getTask(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	d, rerr := m.taskOfRequest(ctx, x, "tasks/get", params)
	if rerr != nil {
		return nil, rerr
	}
	return m.withResult(detailedTask(d), -1)
}

// updateTask is tasks/update: acknowledged for the caller's task. mcpbus
// surfaces no inputRequests, so every response is for a key that is not
// outstanding, which the extension says to ignore.
func (m *Modern) updateTask(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	if _, rerr := m.taskOfRequest(ctx, x, "tasks/update", params); rerr != nil {
		return nil, rerr
	}
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(params, &p)
	if r := bytes.TrimSpace(p.InputResponses); len(r) == 0 || r[0] != '{' {
		return nil, Errorf(CodeInvalidParams, "tasks/update params: inputResponses must be an object")
	}
	return m.withResult(struct{}{}, -1)
}

// cancelTask is tasks/cancel: an acknowledgement once the cancel is
// recorded (a poller then cancels the task on its server; tasks/get shows
// when it lands). A terminal task is acknowledged as well, unchanged.
func (m *Modern) cancelTask(ctx context.Context, x *Exchange, params json.RawMessage) (any, *Error) {
	if !declaresTasks(params) {
		return nil, errTasksUndeclared("tasks/cancel")
	}
	id, rerr := parseTaskID("tasks/cancel", params)
	if rerr != nil {
		return nil, rerr
	}
	if _, rerr := m.s.requestCancel(ctx, x, "tasks/cancel", id); rerr != nil {
		return nil, rerr
	}
	return m.withResult(struct{}{}, -1)
}

// maxListenTasks bounds the task ids one subscriptions/listen follows.
const maxListenTasks = 100

// listenTaskIDs is the taskIds a subscriptions/listen asks for and gets
// (the first maxListenTasks, empty ones dropped): the request must declare
// the extension to ask for any. Any id is agreed to, the caller's or not:
// notifications/tasks only ever carry the listener's own tasks (the task
// event's user and thread, read with the owner's identity), so agreeing
// tells nothing about another caller's task.
func listenTaskIDs(params json.RawMessage, ids []string) ([]string, *Error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if !declaresTasks(params) {
		return nil, errTasksUndeclared("subscriptions/listen notifications.taskIds")
	}
	var out []string
	for _, id := range ids {
		if id != "" && len(out) < maxListenTasks {
			out = append(out, id)
		}
	}
	return out, nil
}

// ExtensionTaskStatus is the notifications/tasks a task event calls for on
// a 2026-07-28 subscriptions/listen stream: the task as tasks/get shows it
// to userID in threadID, read once; the returned func makes the
// notification for the stream opened by the request with id subscription.
// ok is false when there is nothing to send (not theirs, or unreadable:
// logged).
func (s *Server) ExtensionTaskStatus(ctx context.Context, userID, threadID, taskID string) (func(subscription json.RawMessage) *Message, bool) {
	d, ok := s.notifiedTask(ctx, userID, threadID, taskID)
	if !ok {
		return nil, false
	}
	t := detailedTask(d)
	return func(subscription json.RawMessage) *Message {
		t.Meta = map[string]any{MetaSubscriptionID: subscription}
		return Notification("notifications/tasks", t)
	}, true
}
