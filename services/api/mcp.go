package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/services/api/internal/mcphttp"
)

// MCPConfig configures the aggregated MCP endpoint (/mcp, /sse, /messages).
type MCPConfig struct {
	// PageSize is how many tools one tools/list page holds. Defaults to 100.
	PageSize int
	// IdleTimeout expires a session this long after its last use.
	// Defaults to 30m.
	IdleTimeout time.Duration
	// MaxStreamsPerUser caps a user's open streams per replica. Defaults to 8.
	MaxStreamsPerUser int
	// MaxSessionsPerUser caps a user's sessions across replicas (a new one
	// retires the oldest). Defaults to 64.
	MaxSessionsPerUser int
	// SessionBucketMaxBytes bounds the session bucket, which every replica
	// mirrors in memory. Defaults to 256 MiB.
	SessionBucketMaxBytes int64
	// KeepAlive is the interval of an idle stream's SSE comments. Defaults
	// to 25s.
	KeepAlive time.Duration
	// SessionReplicas is how many NATS servers keep the session and
	// promotion buckets (nats.replicas). Defaults to 1.
	SessionReplicas int
	// PromotionTTL is how long tool_search promotions of a (user, thread)
	// are kept after the last one. Defaults to 24h.
	PromotionTTL time.Duration
	// CatalogTTL is the ttlMs hint of a 2026-07-28 tools/list and
	// server/discover result. Defaults to 60s.
	CatalogTTL time.Duration
}

// newMCP builds the MCP endpoint, opening (or creating) the session and
// promotion buckets.
func (s *Service) newMCP() (*mcphttp.Handler, error) {
	cfg := mcphttp.Config{IdleTimeout: s.cfg.MCP.IdleTimeout, MaxStreamsPerUser: s.cfg.MCP.MaxStreamsPerUser,
		MaxSessionsPerUser: s.cfg.MCP.MaxSessionsPerUser, KeepAlive: s.cfg.MCP.KeepAlive}.WithDefaults()
	js, err := jetstream.New(s.deps.NC)
	if err != nil {
		return nil, fmt.Errorf("api: jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sessions := s.deps.MCPSessions
	if sessions == nil {
		if sessions, err = bus.MCPSessionsKV(ctx, js, s.deps.Names, s.cfg.MCP.SessionReplicas, cfg.IdleTimeout,
			cmp.Or(s.cfg.MCP.SessionBucketMaxBytes, 256<<20)); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	promotionTTL := cmp.Or(s.cfg.MCP.PromotionTTL, 24*time.Hour)
	promotions, err := bus.MCPPromotionsKV(ctx, js, s.deps.Names, s.cfg.MCP.SessionReplicas, promotionTTL)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	var usedStates jetstream.KeyValue
	if s.deps.Sealer != nil {
		if usedStates, err = bus.MCPStatesKV(ctx, js, s.deps.Names, s.cfg.MCP.SessionReplicas, mcpserver.StateTTL); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	srv, err := mcpserver.New(mcpserver.Config{Name: "mcpbus", PageSize: s.cfg.MCP.PageSize, RequestTimeout: s.cfg.RequestTimeout, PromotionTTL: promotionTTL,
		CatalogTTL: s.cfg.MCP.CatalogTTL},
		mcpserver.Deps{NC: s.deps.NC, Names: s.deps.Names, Log: s.log, Promotions: promotions, StateSealer: s.deps.Sealer, UsedStates: usedStates, Now: s.deps.Clock})
	if err != nil {
		return nil, err
	}
	return mcphttp.New(cfg, mcphttp.Deps{Server: srv, Sessions: sessions, NC: s.deps.NC, Names: s.deps.Names, Log: s.log, Now: s.deps.Clock,
		Authenticate: func(r *http.Request) (string, error) {
			c, err := s.identify(r)
			var se *statusError
			if errors.As(err, &se) {
				return "", se.err
			}
			return c.UserID, err
		},
		Allow: func(r *http.Request, set string) error {
			c, err := s.identify(r)
			if err != nil {
				return err
			}
			return s.allowVirtual(c, set)
		}})
}

// mcpRoutes registers the MCP endpoint's paths. The router's middleware
// (body limit, browser guard: Host, Origin and Content-Type) applies to
// them as to REST; identity is checked inside (401 with WWW-Authenticate).
func (s *Service) mcpRoutes(e *echo.Echo) {
	g := e.Group("")
	mcp := echo.WrapHandler(s.mcp)
	g.POST("/mcp", mcp)
	g.GET("/mcp", mcp)
	g.DELETE("/mcp", mcp)
	g.GET("/sse", echo.WrapHandler(http.HandlerFunc(s.mcp.SSE)))
	// A virtual server's endpoints (virtual.go): the same handlers on the
	// set's view, its name passed explicitly.
	onSet := func(h func(http.ResponseWriter, *http.Request, string)) echo.HandlerFunc {
		return func(c echo.Context) error {
			h(c.Response(), c.Request(), c.Param("name"))
			return nil
		}
	}
	g.POST("/mcp/v/:name", onSet(s.mcp.ServeVirtual))
	g.GET("/mcp/v/:name", onSet(s.mcp.ServeVirtual))
	g.DELETE("/mcp/v/:name", onSet(s.mcp.ServeVirtual))
	g.GET("/sse/v/:name", onSet(s.mcp.SSEVirtual))
	g.POST("/messages", echo.WrapHandler(http.HandlerFunc(s.mcp.Messages)))
}

// mcpOpenAPIPaths documents the MCP endpoint's paths in /api/openapi.json
// (their bodies are MCP's JSON-RPC messages, not REST resources).
func mcpOpenAPIPaths() obj {
	rpc := obj{"type": "object", "description": "a JSON-RPC 2.0 message (MCP)", "additionalProperties": true}
	sse := func(summary string, params []obj) obj {
		op := opSpec{summary: summary, tag: "mcp", params: params, okDesc: "an SSE stream", errStatus: []int{400, 404, 429}}.build()
		op["responses"].(obj)["200"] = obj{"description": "text/event-stream", "content": obj{"text/event-stream": obj{"schema": obj{"type": "string"}}}}
		return op
	}
	setName := pathParam("name", "the virtual server")
	session := obj{"name": "Mcp-Session-Id", "in": "header", "required": true, "description": "the id initialize returned", "schema": obj{"type": "string"}}
	return obj{
		"/mcp": obj{
			"post": opSpec{summary: "MCP streamable HTTP (2025-03-26 to 2025-11-25): one JSON-RPC message; the response as JSON or one SSE event, as Accept says; 202 for a notification", tag: "mcp",
				body: rpc, okDesc: "the JSON-RPC response", okSchema: rpc, errStatus: []int{400, 404, 413, 503}}.build(),
			"get":    sse("MCP streamable HTTP: the session's stream of server notifications", []obj{session}),
			"delete": opSpec{summary: "End an MCP session on every replica", tag: "mcp", params: []obj{session}, ok: http.StatusNoContent, okDesc: "ended", okSchema: anyObject, errStatus: []int{400, 404, 503}}.build(),
		},
		"/sse": obj{"get": sse("MCP HTTP+SSE (2024-11-05): the session's stream; its first event names the messages endpoint", nil)},
		"/mcp/v/{name}": obj{
			"post": opSpec{summary: "/mcp for one virtual server: its view of the catalog, its calls only (a session serves the path it was initialized on)", tag: "mcp",
				params: []obj{setName}, body: rpc, okDesc: "the JSON-RPC response", okSchema: rpc, errStatus: []int{400, 403, 404, 413, 503}}.build(),
			"get":    sse("/mcp's stream for one virtual server's session", []obj{setName, session}),
			"delete": opSpec{summary: "End a virtual server's MCP session on every replica", tag: "mcp", params: []obj{setName, session}, ok: http.StatusNoContent, okDesc: "ended", okSchema: anyObject, errStatus: []int{400, 403, 404, 503}}.build(),
		},
		"/sse/v/{name}": obj{"get": sse("/sse for one virtual server: its messages endpoint is /messages", []obj{setName})},
		"/messages": obj{"post": opSpec{summary: "MCP HTTP+SSE (2024-11-05): one JSON-RPC message for the session of session_id; the response arrives on its stream", tag: "mcp",
			params: []obj{queryParam("session_id", "the session the endpoint event named")}, body: rpc, ok: http.StatusAccepted, okDesc: "accepted", okSchema: anyObject,
			errStatus: []int{400, 404, 413, 503}}.build()},
	}
}
