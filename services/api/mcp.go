package api

import (
	"context"
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
	// KeepAlive is the interval of an idle stream's SSE comments. Defaults
	// to 25s.
	KeepAlive time.Duration
	// SessionReplicas is how many NATS servers keep the session bucket
	// (nats.replicas). Defaults to 1.
	SessionReplicas int
}

// newMCP builds the MCP endpoint, opening (or creating) the session bucket.
func (s *Service) newMCP() (*mcphttp.Handler, error) {
	srv, err := mcpserver.New(mcpserver.Config{Name: "mcpbus", PageSize: s.cfg.MCP.PageSize, RequestTimeout: s.cfg.RequestTimeout},
		mcpserver.Deps{NC: s.deps.NC, Log: s.log})
	if err != nil {
		return nil, err
	}
	cfg := mcphttp.Config{IdleTimeout: s.cfg.MCP.IdleTimeout, MaxStreamsPerUser: s.cfg.MCP.MaxStreamsPerUser, KeepAlive: s.cfg.MCP.KeepAlive}.WithDefaults()
	kv := s.deps.MCPSessions
	if kv == nil {
		js, err := jetstream.New(s.deps.NC)
		if err != nil {
			return nil, fmt.Errorf("api: jetstream: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if kv, err = bus.MCPSessionsKV(ctx, js, s.cfg.MCP.SessionReplicas, cfg.IdleTimeout); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	return mcphttp.New(cfg, mcphttp.Deps{Server: srv, Sessions: kv, NC: s.deps.NC, Log: s.log,
		Authenticate: func(r *http.Request) (string, error) {
			c, err := s.identify(r)
			return c.UserID, err
		}})
}

// mcpRoutes registers the MCP endpoint's paths. mcpGuards are the web
// checks (Host, Origin, Content-Type) REST has; the lead wires the web
// middleware here at merge.
func (s *Service) mcpRoutes(e *echo.Echo) {
	var mcpGuards []echo.MiddlewareFunc
	g := e.Group("", mcpGuards...)
	g.Any("/mcp", echo.WrapHandler(s.mcp))
	g.GET("/sse", echo.WrapHandler(http.HandlerFunc(s.mcp.SSE)))
	g.POST("/messages", echo.WrapHandler(http.HandlerFunc(s.mcp.Messages)))
}
