package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
)

// auditReply is the body of GET /api/mcp/audit.
type auditReply struct {
	Records []audit.Record `json:"records"`
}

// auditRoutes registers the admin-only audit log route on the /api group.
func (s *Service) auditRoutes(g *echo.Group) {
	g.GET("/mcp/audit", s.getAudit, requireAdmin)
}

// getAudit serves the newest audit records, oldest first: ?user=, ?tool=,
// ?kind=call|config|reply_dropped, ?limit= (default 100, at most audit.MaxLimit).
func (s *Service) getAudit(c echo.Context) error {
	f := audit.Filter{User: c.QueryParam("user"), Tool: c.QueryParam("tool"), Kind: c.QueryParam("kind")}
	if !audit.KnownKind(f.Kind) {
		return bus.Errorf(bus.CodeInvalidRequest, "kind must be %s", audit.KindsText)
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return bus.Errorf(bus.CodeInvalidRequest, "limit must be from 1 to %d", audit.MaxLimit)
		}
		f.Limit = n
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
