package api

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/quota"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// serverView is one server of GET /api/mcp/servers: discovery's status
// and, with a database, how many of its tools' pins are in each state.
type serverView struct {
	bus.ServerStatus
	// Pins counts the server's tool pins by state (every state of
	// store.PinStates, zeros included): approved, pending (waiting for an
	// admin), blocked, rejected, removed. Absent without a database.
	Pins map[string]int `json:"pins,omitempty"`
	// QuotaState is each of the server's own quotas
	// (mcpServers.<name>.quotas) and what it counts now across replicas.
	QuotaState []quotaState `json:"quota_state,omitempty"`
}

// serversReply is GET /api/mcp/servers: discovery's reply with pin
// counts per server.
type serversReply struct {
	bus.ServersReply
	Servers []serverView `json:"servers"`
}

// listServers answers GET /api/mcp/servers with the per-server discovery
// status of one discovery replica: enabled, transport, state (ok, failed,
// disabled, pending), last error, tool count, discovered_at and generation
// (and for a failed server consecutive_failures and next_retry_at, when a
// lookup retries it), plus the tool-name clashes and, when the catalog
// cannot be published, why. A failed stdio server also has the end of its
// stderr (redacted: its env values and URL credentials are "***"), which
// plain users never see: their failed_servers and tool errors carry the
// error alone. It first runs a catalog lookup, so servers not yet
// discovered are;
// ?refresh=false reports the state as it is. Admin only, like the other
// configuration routes: last errors name internal hosts and paths, and
// stderr is whatever the upstream printed. Each server also has its pin
// counts by state (pinCounts).
func (s *Service) listServers(c echo.Context) error {
	ctx, cancel := s.busCtx(c)
	defer cancel()
	req := bus.ServersRequest{NoRefresh: c.QueryParam("refresh") == "false"}
	reply, err := bus.Request[bus.ServersReply](ctx, s.deps.NC, s.deps.Names.InternalServers(), req)
	if err != nil {
		return err
	}
	out := serversReply{ServersReply: reply, Servers: make([]serverView, len(reply.Servers))}
	quotas := s.serverQuotas()
	r := quotaReader{s: s}
	for i, st := range reply.Servers {
		out.Servers[i] = serverView{ServerStatus: st, Pins: s.pinCounts(ctx, st.Name)}
		for j, q := range quotas[st.Name] {
			qs, err := r.state(ctx, fmt.Sprintf("mcpServers.%s.quotas[%d]", st.Name, j), quota.ServerGroup(st.Name, j), q)
			if err != nil {
				return err
			}
			out.Servers[i].QuotaState = append(out.Servers[i].QuotaState, qs)
		}
	}
	return c.JSON(http.StatusOK, out)
}

// serverQuotas is each server's quotas in the MCP configuration file, by
// name (none when it cannot be read: the status still serves).
func (s *Service) serverQuotas() map[string][]config.Quota {
	path, err := s.configPath()
	if err != nil {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	ext, err := config.ParseExtensions(path, data)
	if err != nil {
		return nil
	}
	out := map[string][]config.Quota{}
	for _, srv := range ext.Servers {
		if len(srv.Quotas) > 0 {
			out[srv.Name] = srv.Quotas
		}
	}
	return out
}

// pinCounts is how many pins of server are in each state, nil without a
// database or when it cannot answer (logged: the status still serves).
func (s *Service) pinCounts(ctx context.Context, server string) map[string]int {
	if s.deps.Store == nil {
		return nil
	}
	pins, err := s.deps.Store.Pins().ListServerPins(ctx, store.ServerPinsParams{Server: server})
	if err != nil {
		s.log.Warn("cannot count the pins of a server", "server", server, observability.Err(err))
		return nil
	}
	out := map[string]int{}
	for _, st := range store.PinStates() {
		out[st] = 0
	}
	for _, p := range pins {
		if p.Owner == "" { // a deployment server's (personal ones are their users')
			out[p.State]++
		}
	}
	return out
}
