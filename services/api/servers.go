package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// listServers answers GET /api/mcp/servers with the per-server discovery
// status of one discovery replica: enabled, transport, state (ok, failed,
// disabled, pending), last error, tool count, discovered_at and generation
// (and for a failed server consecutive_failures and next_retry_at, when a
// lookup retries it), plus the tool-name clashes and, when the catalog cannot be published,
// why. It first runs a catalog lookup, so servers not yet discovered are;
// ?refresh=false reports the state as it is. Admin only, like the other
// configuration routes: last errors name internal hosts and paths.
func (s *Service) listServers(c echo.Context) error {
	ctx, cancel := s.busCtx(c)
	defer cancel()
	req := bus.ServersRequest{NoRefresh: c.QueryParam("refresh") == "false"}
	reply, err := bus.Request[bus.ServersReply](ctx, s.deps.NC, bus.SubjectInternalServers, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reply)
}
