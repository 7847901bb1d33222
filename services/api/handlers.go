package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

func (s *Service) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is ready when this process is serving, NATS is connected, the KV
// bucket answers and the database (when there is one) pings.
func (s *Service) readyz(c echo.Context) error {
	checks := map[string]string{"nats": "ok", "kv": "ok"}
	ready := s.svc != nil && s.svc.Ready() && !s.drain.draining()
	if !s.deps.NC.IsConnected() {
		checks["nats"], ready = "disconnected", false
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if _, err := s.deps.KV.Status(ctx); err != nil {
		checks["kv"], ready = "unavailable", false
	}
	if s.deps.Store != nil {
		checks["database"] = "ok"
		if err := s.deps.Store.Ping(ctx); err != nil {
			checks["database"], ready = "unavailable", false
		}
	}
	status := http.StatusOK
	state := "ready"
	if !ready {
		status, state = http.StatusServiceUnavailable, "not_ready"
	}
	return c.JSON(status, map[string]any{"status": state, "checks": checks})
}

func (s *Service) busCtx(c echo.Context) (context.Context, context.CancelFunc) {
	ctx := c.Request().Context()
	if id := c.Request().Header.Get(bus.HeaderRequestID); id != "" {
		ctx = bus.WithRequestID(ctx, id)
	}
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// callGrace is how long past a call's timeout_ms the api waits for the
// reply: toolcall ends the call at timeout_ms and answers with its own
// error, which needs the time to come back.
const callGrace = 2 * time.Second

// callCtx is busCtx for a tool call: a timeout_ms the caller gave also
// bounds the wait (plus callGrace), so a call that no toolcall replica
// answers (its request lost with a cut-off NATS node) ends at its own
// deadline, not at the api's bound on every bus request (RequestTimeout).
func (s *Service) callCtx(c echo.Context, timeoutMS int64) (context.Context, context.CancelFunc) {
	ctx, cancel := s.busCtx(c)
	if timeoutMS <= 0 {
		return ctx, cancel
	}
	cctx, ccancel := context.WithTimeout(ctx, time.Duration(timeoutMS)*time.Millisecond+callGrace)
	return cctx, func() { ccancel(); cancel() }
}

// callWaitError names the tool and its deadline when the api gave up
// waiting for a call's reply (ctx ended); other errors, toolcall's own
// timeout among them, pass as they are.
func callWaitError(ctx context.Context, err error, tool string, timeoutMS int64) error {
	if timeoutMS <= 0 || !errors.Is(ctx.Err(), context.DeadlineExceeded) || bus.AsError(err).Code != bus.CodeUpstreamTimeout {
		return err
	}
	return bus.Wrap(bus.CodeUpstreamTimeout, err, fmt.Sprintf(
		"tool '%s': no mcpbus replica answered within the call's timeout_ms (%d ms); call again", tool, timeoutMS))
}

func (s *Service) listTools(c echo.Context) error {
	ctx, cancel := s.busCtx(c)
	defer cancel()
	if s.pub != nil {
		// The cheap signature check on lookup; the follower loop does the rest.
		if _, err := s.pub.PublishIfStatChanged(ctx); err != nil {
			s.log.Warn("extensions config not published", observability.Err(err))
		}
	}
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	pg, paged, err := pageOf(c)
	if err != nil {
		return err
	}
	req := bus.ToolsListRequest{UserID: callerOf(c).UserID, ThreadID: c.QueryParam("thread_id"), LatestUserMessage: c.QueryParam("q"), VirtualServer: set}
	reply, err := bus.ListCatalog(ctx, s.deps.NC, s.deps.Names.ToolsList(), req)
	if err != nil {
		return err
	}
	if paged {
		return pageTools(c, pg, &reply)
	}
	return c.JSON(http.StatusOK, reply)
}

// callBody is the body of POST /api/mcp/tools/{name}/call.
type callBody struct {
	Arguments json.RawMessage  `json:"arguments"`
	ThreadID  string           `json:"thread_id"`
	RunID     string           `json:"run_id"`
	Promoted  []string         `json:"promoted"`
	Context   *bus.CallContext `json:"context"`
	Metadata  json.RawMessage  `json:"metadata"`
	Config    *bus.CallConfig  `json:"config"`
	TimeoutMS int64            `json:"timeout_ms"`
	// Digest is the tool's digest as listed: a changed tool is refused
	// (409 tool_changed) instead of called.
	Digest string `json:"digest"`
}

func (s *Service) callTool(c echo.Context) error {
	var body callBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	set, err := s.virtualOf(c)
	if err != nil {
		return err
	}
	req := bus.Call{
		Tool: c.Param("name"), Arguments: body.Arguments, UserID: callerOf(c).UserID, VirtualServer: set,
		ThreadID: body.ThreadID, RunID: body.RunID, Promoted: body.Promoted,
		Context: body.Context, Metadata: body.Metadata, Config: body.Config, TimeoutMS: body.TimeoutMS,
		Digest: body.Digest,
	}
	if err := req.RejectAuthToken(); err != nil {
		return &statusError{status: http.StatusUnprocessableEntity, err: bus.AsError(err)}
	}
	ctx, cancel := s.callCtx(c, body.TimeoutMS)
	defer cancel()
	// The reply is toolcall's bus.ToolsCallReply as it encoded it: sent on
	// as it is, not decoded and encoded again.
	reply, err := bus.RequestRaw(ctx, s.deps.NC, s.deps.Names.ToolsCall(), req)
	if err != nil {
		return callWaitError(ctx, err, req.Tool, body.TimeoutMS)
	}
	return c.JSONBlob(http.StatusOK, reply)
}

func (s *Service) resetCache(c echo.Context) error {
	ctx, cancel := s.busCtx(c)
	defer cancel()
	reply, err := bus.Request[bus.CacheResetReply](ctx, s.deps.NC, s.deps.Names.CacheReset(), bus.CacheResetRequest{Reason: "api"})
	if err != nil {
		return err
	}
	s.auditConfig(c, "cache_reset", nil, nil)
	return c.JSON(http.StatusOK, reply)
}

// decodeBody reads a JSON object body; an empty body is an empty object.
func decodeBody(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return echo.ErrStatusRequestEntityTooLarge
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return &statusError{status: http.StatusRequestTimeout, err: bus.Errorf(bus.CodeInvalidRequest, "the request body did not arrive within api.read_timeout_seconds")}
		}
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return bus.Wrap(bus.CodeInvalidRequest, err, fmt.Sprintf("request body is not valid JSON (at byte %d)", syntax.Offset))
		case errors.As(err, &typ):
			return bus.Wrap(bus.CodeInvalidRequest, err, fmt.Sprintf("request body is not valid JSON: field %q cannot hold a JSON %s", typ.Field, typ.Value))
		}
		return bus.Wrap(bus.CodeInvalidRequest, err, "request body is not valid JSON")
	}
	return nil
}
