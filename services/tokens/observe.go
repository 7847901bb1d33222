package tokens

import (
	"errors"

	"golang.org/x/oauth2"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// serverLabel is srv's server label: personal connections (owner set) are
// "personal".
func serverLabel(srv *config.Server, owner string) string {
	return metrics.Server(srv.Name, owner != "")
}

// countFetch counts one answered token request (srv nil: it did not
// resolve to a configured server, labelled "unknown").
func (s *Service) countFetch(srv *config.Server, owner string, err error) {
	server, grant := "unknown", "unknown"
	if srv != nil && srv.OAuth != nil {
		server, grant = serverLabel(srv, owner), srv.OAuth.GrantType
	}
	outcome := "ok"
	if err != nil {
		outcome = string(bus.AsError(err).Code)
	}
	s.deps.Metrics.Fetches.WithLabelValues(server, grant, outcome).Inc()
}

// countRefresh counts one request to a token endpoint and, for
// invalid_grant, the broken chain.
func (s *Service) countRefresh(srv *config.Server, owner string, err error) {
	server, grant := serverLabel(srv, owner), srv.OAuth.GrantType
	outcome := "ok"
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
	case errors.As(err, &re) && re.ErrorCode == "invalid_grant":
		outcome = "invalid_grant"
		s.deps.Metrics.InvalidGrant.WithLabelValues(server).Inc()
	default:
		outcome = "failed"
	}
	s.deps.Metrics.Refreshes.WithLabelValues(server, grant, outcome).Inc()
}
