package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/config"

	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Virtual servers at the api (docs/virtual-servers.md): REST names one
// with ?virtual=<name>, the MCP endpoint with its path (/mcp/v/<name>,
// /sse/v/<name>; /messages uses its session's). A key bound to virtual
// servers (api.keys[].virtual_servers) may use only those: the default
// endpoints refuse it with forbidden naming the policy. Everything past
// that (what the set holds, its overrides and quotas) is decided by
// discovery and toolcall, which see the set's name on every request.

// allowVirtual is the key policy: nil when caller may use the virtual
// server set ("" is the whole catalog), forbidden when its key is bound
// to others, not_found for a set no one defined.
func (s *Service) allowVirtual(caller Caller, set string) error {
	if err := virtual.Check(caller.VirtualServers, set, virtual.PolicyKey, "the API key of user '"+caller.UserID+"'"); err != nil {
		label := set
		if _, known := s.virtual.Get(set); !known && set != "" {
			label = "unknown" // never a caller's string as a label
		}
		s.metrics.virtualRefused.WithLabelValues(label).Inc()
		return err
	}
	_, err := s.virtual.Resolve(set)
	return err
}

// virtualOf is the virtual server a REST request names (?virtual=),
// checked against the caller's key.
func (s *Service) virtualOf(c echo.Context) (string, error) {
	set := c.QueryParam("virtual")
	return set, s.allowVirtual(callerOf(c), set)
}

// virtualServersReply is GET /api/mcp/virtual-servers.
type virtualServersReply struct {
	VirtualServers []config.VirtualServer `json:"virtual_servers"`
}

// listVirtualServers serves config.yaml's virtual servers as the services
// apply them (admin): sets, overrides, quotas and pinning policies.
func (s *Service) listVirtualServers(c echo.Context) error {
	out := virtualServersReply{VirtualServers: s.cfg.Virtual.Servers}
	if out.VirtualServers == nil {
		out.VirtualServers = []config.VirtualServer{}
	}
	return c.JSON(http.StatusOK, out)
}
