package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The task routes forward to the task poller's subjects; the poller checks
// ownership (another user's or thread's task is not_found).

// taskRoutes registers the task routes on the /api group: per thread, and
// over every thread of the caller (list and live events).
func (s *Service) taskRoutes(g *echo.Group) {
	g.GET("/threads/:thread_id/mcp-tasks", s.listTasks)
	g.GET("/threads/:thread_id/mcp-tasks/:task_id", s.getTask)
	g.POST("/threads/:thread_id/mcp-tasks/:task_id/cancel", s.cancelTask)
	g.GET("/mcp/tasks", s.listTasks)
	g.GET("/mcp/tasks/stream", s.followTasks)
}

// listTasks serves the caller's tasks in the thread of the path, or over
// every thread (GET /api/mcp/tasks: each item carries its thread_id).
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

// followTasks streams task events (mcpbus.events.tasks.<thread>, as the
// task poller publishes them to JetStream) as server-sent events: the
// caller's own tasks over every thread, every user's for an admin. An
// event is sent when a task needs input, ends, or its tracking degrades;
// the console reloads the task then.
func (s *Service) followTasks(c echo.Context) error {
	caller := callerOf(c)
	msgs := make(chan *nats.Msg, 256)
	sub, err := s.deps.NC.ChanSubscribe(s.deps.Names.TaskEvents("*"), msgs)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "task events cannot be followed right now")
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The subscription is in place before the stream says it is ready.
	if err := s.deps.NC.Flush(); err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "task events cannot be followed right now")
	}
	return s.serveEvents(c, "following task events", func(ctx context.Context, send func(any) error) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case m := <-msgs:
				var ev bus.TaskEventMessage
				if json.Unmarshal(m.Data, &ev) != nil || !mayFollow(caller, ev) {
					continue
				}
				if err := send(ev); err != nil {
					return err
				}
			}
		}
	})
}

// mayFollow reports whether caller may see the event: their own task, or
// any as an admin.
func mayFollow(caller Caller, ev bus.TaskEventMessage) bool {
	return ev.UserID == caller.UserID || caller.Role == RoleAdmin
}
