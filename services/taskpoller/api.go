package taskpoller

import (
	"context"
	"errors"
	"regexp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// MaxListLimit bounds mcpbus.tasks.list's limit.
const MaxListLimit = 100

var threadIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// registerAPI adds mcpbus.tasks.list, .get and .cancel.
func (s *Service) registerAPI(svc *microsvc.Service) error {
	if err := microsvc.HandleVerb(svc, "tasks-list", bus.VerbTasksList, s.list); err != nil {
		return err
	}
	if err := microsvc.HandleVerb(svc, "tasks-get", bus.VerbTasksGet, s.get); err != nil {
		return err
	}
	return microsvc.HandleVerb(svc, "tasks-cancel", bus.VerbTasksCancel, s.requestCancel)
}

// checkRequest validates the fields every task request carries; a list
// (needTask false) may leave thread_id empty for every thread.
func (s *Service) checkRequest(req bus.TaskListRequest, needTask bool) error {
	if !s.cfg.Enabled {
		return bus.Errorf(bus.CodeUnavailable, "MCP task service not available")
	}
	if req.UserID == "" {
		return bus.Errorf(bus.CodeInvalidRequest, "user_id is required")
	}
	if !threadIDPattern.MatchString(req.ThreadID) && (needTask || req.ThreadID != "") {
		return bus.Errorf(bus.CodeInvalidRequest, "thread_id must match ^[A-Za-z0-9_-]{1,64}$")
	}
	if needTask && req.TaskID == "" {
		return bus.Errorf(bus.CodeInvalidRequest, "task_id is required")
	}
	return nil
}

func (s *Service) list(ctx context.Context, req bus.TaskListRequest) (bus.TaskListReply, error) {
	if err := s.checkRequest(req, false); err != nil {
		return bus.TaskListReply{}, err
	}
	limit := req.Limit
	if limit == 0 {
		limit = store.DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return bus.TaskListReply{}, bus.Errorf(bus.CodeInvalidRequest, "limit must be between 1 and %d", MaxListLimit)
	}
	rows, err := s.deps.Tasks.ListTasks(ctx, store.ListTasksParams{Namespace: s.deps.Names.Namespace(), UserID: req.UserID, ThreadID: req.ThreadID, Limit: limit, Before: req.Before})
	if err != nil {
		return bus.TaskListReply{}, bus.Wrap(bus.CodeUnavailable, err, "MCP task repo not available")
	}
	out := bus.TaskListReply{Tasks: make([]bus.TaskItem, 0, len(rows))}
	for i := range rows {
		item := tasks.Item(&rows[i], s.cfg.Tasks.TrackingDegradedAfterErrors)
		if req.ThreadID == "" {
			item.ThreadID = rows[i].ThreadID
		}
		out.Tasks = append(out.Tasks, item)
	}
	return out, nil
}

func (s *Service) get(ctx context.Context, req bus.TaskListRequest) (bus.TaskDetail, error) {
	if err := s.checkRequest(req, true); err != nil {
		return bus.TaskDetail{}, err
	}
	t, err := s.deps.Tasks.GetTask(ctx, store.GetTaskParams{ID: req.TaskID})
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && (t.UserID != req.UserID || t.ThreadID != req.ThreadID ||
		t.Namespace != s.deps.Names.Namespace())):
		return bus.TaskDetail{}, bus.Errorf(bus.CodeNotFound, "MCP task not found")
	case err != nil:
		return bus.TaskDetail{}, bus.Wrap(bus.CodeUnavailable, err, "MCP task repo not available")
	}
	return tasks.Detail(t, s.cfg.Tasks.TrackingDegradedAfterErrors), nil
}

// requestCancel records the request and fences the poll lease; a poller
// makes the remote call. Repeating it, or cancelling a terminal task,
// changes nothing.
func (s *Service) requestCancel(ctx context.Context, req bus.TaskListRequest) (bus.TaskDetail, error) {
	if err := s.checkRequest(req, true); err != nil {
		return bus.TaskDetail{}, err
	}
	t, err := s.deps.Tasks.RequestCancel(ctx, store.RequestCancelParams{Namespace: s.deps.Names.Namespace(), UserID: req.UserID, ThreadID: req.ThreadID, TaskID: req.TaskID})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return bus.TaskDetail{}, bus.Errorf(bus.CodeNotFound, "MCP task not found")
	case err != nil:
		return bus.TaskDetail{}, bus.Wrap(bus.CodeUnavailable, err, "MCP task repo not available")
	}
	return tasks.Detail(t, s.cfg.Tasks.TrackingDegradedAfterErrors), nil
}
