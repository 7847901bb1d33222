package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// taskThreadID is what a thread id must look like to own a durable task: it
// becomes a NATS subject token of the task's events.
var taskThreadID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// toolsetOf returns the task toolset in which raw is the role's tool.
func toolsetOf(srv *config.Server, raw string) (ts config.TaskToolset, role string, ok bool) {
	for _, ts := range srv.TaskToolsets {
		switch raw {
		case ts.SubmitTool:
			return ts, tasks.RoleSubmit, true
		case ts.StatusTool:
			return ts, tasks.RoleStatus, true
		case ts.CancelTool:
			return ts, tasks.RoleCancel, true
		}
	}
	return config.TaskToolset{}, "", false
}

// checkSubmitAdmission refuses a submit before anything reaches the
// upstream when no task runtime can track it.
func (s *Service) checkSubmitAdmission(thread string) error {
	if !s.cfg.MCPTasks.Enabled || s.deps.Tasks == nil {
		return bus.Errorf(bus.CodeConfigError, "%s", tasks.RuntimeNotInitialized)
	}
	if !taskThreadID.MatchString(thread) {
		return bus.Errorf(bus.CodeInvalidRequest, "thread_id must match ^[A-Za-z0-9_-]{1,64}$ to submit a durable task")
	}
	return nil
}

// submitTask turns the remote submit's result into a tracked task: it
// validates the reply, stores the row and returns the handle. The remote id
// never leaves mcpbus. After a successful remote submit, any failure except
// a duplicate is followed by a best-effort remote cancel.
func (s *Service) submitTask(ctx context.Context, srv *config.Server, ts config.TaskToolset, r *interceptors.Request,
	res *interceptors.Result, chain callChain, req bus.Call) (bus.ToolsCallReply, error) {
	if res.IsError {
		te := tasks.ToolErrorFromContent(ts.SubmitTool, res.Content)
		return bus.ToolsCallReply{}, bus.WrapUser(bus.CodeUpstreamError, te, te.Message)
	}
	reply, err := tasks.ParseSubmit(ts.SubmitTool, res.StructuredContent)
	if err != nil {
		// A reply we refuse may still name a task that now runs remotely
		// (an over-long id, a wrong status): nothing is left untracked.
		var named struct {
			TaskID string `json:"task_id"`
		}
		if json.Unmarshal(res.StructuredContent, &named) == nil && named.TaskID != "" {
			s.cancelUntracked(srv, ts, r, named.TaskID, chain)
		}
		return bus.ToolsCallReply{}, bus.WrapUser(bus.CodeUpstreamError, err, fmt.Sprintf("MCP task tool '%s' returned a reply mcpbus cannot track", ts.SubmitTool))
	}
	row, err := tasks.NewTask(tasks.Submit{
		UserID: r.UserID, ThreadID: r.ThreadID, RunID: req.RunID, ToolCallID: req.ToolCallID,
		ServerName: srv.Name, TaskName: ts.Name, Reply: reply,
		Toolset: tasks.DriverData{Toolset: ts.Name, SubmitTool: ts.SubmitTool, StatusTool: ts.StatusTool, CancelTool: ts.CancelTool,
			Traceparent: tracing.Traceparent(ctx)},
	}, s.deps.Clock().UTC(), tasks.SettingsFrom(s.cfg.MCPTasks))
	inserting := err == nil
	if inserting {
		row.Namespace = s.deps.Names.Namespace() // only this deployment's pollers claim it
		row, err = s.deps.Tasks.InsertTask(ctx, store.InsertTaskParams{Task: *row})
		if errors.Is(err, store.ErrConflict) {
			return bus.ToolsCallReply{}, bus.Errorf(bus.CodeInvalidRequest, "%s", tasks.DuplicateError(reply.RemoteTaskID, srv.Name))
		}
	}
	if err != nil {
		s.cancelUntracked(srv, ts, r, reply.RemoteTaskID, chain)
		return bus.ToolsCallReply{}, untrackedError(err)
	}
	handle := tasks.Handle(row)
	text, _ := json.Marshal(handle)
	block, _ := json.Marshal(map[string]string{"type": "text", "text": string(text)})
	s.log.InfoContext(ctx, "durable task submitted", observability.Server(srv.Name), "task_id", row.ID, "task_name", row.TaskName)
	return bus.ToolsCallReply{Tool: req.Tool, Server: srv.Name, Content: []json.RawMessage{block}, Task: &handle}, nil
}

// untrackedError is the reply to a submit that the remote server accepted
// but mcpbus could not track (the remote task was cancelled): a reply the
// task protocol refuses is upstream_error, a name the configuration made too
// long config_error, a database that cannot be reached unavailable, and
// anything else internal. The store's text never reaches the caller: it
// may name the database; Respond logs it.
func untrackedError(err error) error {
	var be *bus.Error
	var pe *tasks.ProtocolError
	var ne *tasks.NameError
	switch {
	case errors.As(err, &be):
		return be
	case errors.As(err, &pe):
		return bus.WrapUser(bus.CodeUpstreamError, err, "the MCP task reply cannot be tracked")
	case errors.As(err, &ne):
		return bus.WrapUser(bus.CodeConfigError, err, "the MCP task cannot be tracked under this configuration")
	case errors.Is(err, store.ErrUnavailable):
		return bus.Wrap(bus.CodeUnavailable, err, "the task database is not available; the remote task was cancelled")
	default:
		return bus.Wrap(bus.CodeInternal, err, "the task could not be recorded; the remote task was cancelled")
	}
}

// cancelUntracked makes the best-effort remote cancel of a task that could
// not be tracked; a failure is only logged.
func (s *Service) cancelUntracked(srv *config.Server, ts config.TaskToolset, r *interceptors.Request, remoteID string, chain callChain) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout(srv))
	defer cancel()
	args, _ := json.Marshal(map[string]string{"task_id": remoteID})
	cr := *r
	cr.Tool, cr.VisibleName, cr.Arguments = ts.CancelTool, ts.CancelTool, args
	if _, err := chain.run(ctx, newUpcall(bus.Call{}), &cr); err != nil {
		s.log.Warn("Failed to cancel untracked MCP task", observability.Server(srv.Name), "task_name", ts.Name, observability.Err(err))
	}
}

func cancelTimeout(srv *config.Server) time.Duration {
	if srv.ToolCallTimeout > 0 {
		return srv.ToolCallTimeout
	}
	return 30 * time.Second
}

// errInternalTaskTool refuses an agent's direct call of a status or cancel
// tool: they are runtime-internal.
func errInternalTaskTool(name string) error {
	return bus.Errorf(bus.CodeNotFound, "%s", fmt.Sprintf("tool '%s' is internal to the durable task runtime", name))
}
