package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The task routes forward to the task poller's subjects; the poller checks
// ownership (another user's or thread's task is not_found).

func (s *Service) listTasks(c echo.Context) error {
	req := bus.TaskListRequest{UserID: callerOf(c).UserID, ThreadID: c.Param("thread_id")}
	if raw := c.QueryParam("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 100 {
			return &statusError{status: http.StatusUnprocessableEntity,
				err: bus.Errorf(bus.CodeInvalidRequest, "limit must be an integer between 1 and 100")}
		}
		req.Limit = n
	}
	ctx, cancel := s.busCtx(c)
	defer cancel()
	reply, err := bus.Request[bus.TaskListReply](ctx, s.deps.NC, s.deps.Names.TasksList(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}

func (s *Service) getTask(c echo.Context) error {
	return s.taskDetail(c, s.deps.Names.TasksGet())
}

func (s *Service) cancelTask(c echo.Context) error {
	return s.taskDetail(c, s.deps.Names.TasksCancel())
}

func (s *Service) taskDetail(c echo.Context, subject string) error {
	ctx, cancel := s.busCtx(c)
	defer cancel()
	reply, err := bus.Request[bus.TaskDetail](ctx, s.deps.NC, subject, bus.TaskListRequest{
		UserID: callerOf(c).UserID, ThreadID: c.Param("thread_id"), TaskID: c.Param("task_id"),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}
