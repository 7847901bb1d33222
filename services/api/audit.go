package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// auditReply is the body of GET /api/mcp/audit.
type auditReply struct {
	Records []audit.Record `json:"records"`
}

// auditRoutes registers the admin-only audit log routes on the /api group.
func (s *Service) auditRoutes(g *echo.Group) {
	g.GET("/mcp/audit", s.getAudit, requireAdmin)
	g.GET("/mcp/audit/stream", s.followAudit, requireAdmin)
	g.GET("/mcp/stats/calls", s.callsPerMinute)
}

// now is the api's clock (Deps.Clock, else time.Now).
func (s *Service) now() time.Time {
	if s.deps.Clock != nil {
		return s.deps.Clock()
	}
	return time.Now()
}

// callsReply is the body of GET /api/mcp/stats/calls.
type callsReply struct {
	// Scope is "deployment" (an admin: every user's calls) or "caller".
	Scope   string         `json:"scope"`
	Minutes []audit.Minute `json:"minutes"`
}

// callsPerMinute serves the tool calls and failed calls of each of the
// last ?minutes= minutes (default 10, at most 60), counted from the audit
// stream, which holds every replica's records: every user's for an admin,
// the caller's own otherwise.
func (s *Service) callsPerMinute(c echo.Context) error {
	minutes := 10
	if v := c.QueryParam("minutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 60 {
			return bus.Errorf(bus.CodeInvalidRequest, "minutes must be from 1 to 60")
		}
		minutes = n
	}
	caller := callerOf(c)
	reply := callsReply{Scope: "deployment"}
	user := ""
	if caller.Role != RoleAdmin {
		reply.Scope, user = "caller", caller.UserID
	}
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the audit log cannot be read")
	}
	reply.Minutes, err = audit.PerMinute(c.Request().Context(), js, s.deps.Names, user, s.now(), minutes)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the audit log cannot be read")
	}
	return c.JSON(http.StatusOK, reply)
}

// auditFilter reads ?user=, ?tool=, ?kind=call|config|reply_dropped,
// ?since= (RFC 3339) and ?limit= (default 100, at most audit.MaxLimit).
func auditFilter(c echo.Context) (audit.Filter, error) {
	f := audit.Filter{User: c.QueryParam("user"), Tool: c.QueryParam("tool"), Kind: c.QueryParam("kind")}
	if !audit.KnownKind(f.Kind) {
		return f, bus.Errorf(bus.CodeInvalidRequest, "kind must be %s", audit.KindsText)
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return f, bus.Errorf(bus.CodeInvalidRequest, "limit must be from 1 to %d", audit.MaxLimit)
		}
		f.Limit = n
	}
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return f, bus.Errorf(bus.CodeInvalidRequest, "since must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		f.Since = t
	}
	return f, nil
}

// getAudit serves the newest audit records matching auditFilter, oldest first.
func (s *Service) getAudit(c echo.Context) error {
	f, err := auditFilter(c)
	if err != nil {
		return err
	}
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the audit log cannot be read")
	}
	recs, err := audit.Read(c.Request().Context(), js, s.deps.Names, f)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the audit log cannot be read")
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	return c.JSON(http.StatusOK, auditReply{Records: recs})
}

// followAudit streams the newest records matching auditFilter and then
// every new one as server-sent events (one record per "data:" line),
// until the client leaves or the service drains.
func (s *Service) followAudit(c echo.Context) error {
	f, err := auditFilter(c)
	if err != nil {
		return err
	}
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return bus.Wrap(bus.CodeUnavailable, err, "the audit log cannot be read")
	}
	return s.serveEvents(c, "following the audit log", func(ctx context.Context, send func(any) error) error {
		return audit.Follow(ctx, js, s.deps.Names, f, func(r audit.Record) error { return send(r) })
	})
}

// serveEvents answers with server-sent events: a comment line once the
// stream is ready, then one "data:" line of JSON per value follow sends,
// until the client leaves or the service drains.
func (s *Service) serveEvents(c echo.Context, ready string, follow func(ctx context.Context, send func(any) error) error) error {
	ctx, cancel := context.WithCancel(c.Request().Context())
	defer cancel()
	go func() {
		select {
		case <-s.drain.closing():
			cancel()
		case <-ctx.Done():
		}
	}()
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, ": %s\n\n", ready)
	w.Flush()
	err := follow(ctx, func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		w.Flush()
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("event stream ended", "stream", c.Path(), observability.Err(err))
	}
	return nil
}

// auditConfig writes the record of a config change made through the API:
// who, which action, and which servers and keys changed (names only).
func (s *Service) auditConfig(c echo.Context, action string, before, after []byte) {
	s.deps.Audit.Write(c.Request().Context(), audit.Record{
		Kind: audit.KindConfig, User: callerOf(c).UserID, Action: action, Changes: audit.ConfigChanges(before, after),
		RequestID: c.Response().Header().Get(echo.HeaderXRequestID),
	})
}

// auditPersonal writes the record of a change to one of the caller's
// personal connections (before or after nil: created or deleted), named by
// the connection's name.
func (s *Service) auditPersonal(c echo.Context, action, name string, before, after json.RawMessage) {
	doc := func(def json.RawMessage) []byte {
		if def == nil {
			return nil
		}
		b, _ := json.Marshal(map[string]map[string]json.RawMessage{"mcpServers": {name: def}})
		return b
	}
	s.auditConfig(c, action, doc(before), doc(after))
}
