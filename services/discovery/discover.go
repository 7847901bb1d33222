package discovery

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// discoverServer opens an ephemeral session (spawn or connect, initialize,
// tools/list) under the server's session_init_timeout as one deadline, and
// closes it.
func discoverServer(srv *config.Server, log *slog.Logger) ([]mcpclient.Tool, error) {
	ctx := context.Background()
	if srv.SessionInitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, srv.SessionInitTimeout)
		defer cancel()
	}
	if err := srv.ValidateCwd(); err != nil {
		return nil, bus.Wrap(bus.CodeConfigError, err, err.Error())
	}
	spec := mcpclient.Spec{
		Server: srv.Name, Transport: srv.Type,
		Command: srv.Command, Args: srv.Args, Env: srv.Env, Dir: srv.Cwd,
		URL: srv.URL, Headers: srv.Headers,
		Logger:     log.With(observability.Server(srv.Name)),
		ClientName: "mcpbus-discovery", ClientVersion: "0.1.0",
	}
	c, err := mcpclient.Connect(ctx, spec)
	if err != nil {
		return nil, initError(srv, ctx, err)
	}
	defer func() { _ = c.Close() }()
	tools, err := c.ListTools(ctx)
	if err != nil {
		return nil, initError(srv, ctx, fmt.Errorf("tools/list: %w", err))
	}
	return tools, nil
}

func initError(srv *config.Server, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return bus.Wrap(bus.CodeInitTimeout, err, fmt.Sprintf("MCP server '%s' did not finish discovery within session_init_timeout (%s)", srv.Name, srv.SessionInitTimeout))
	}
	return bus.Wrap(bus.CodeUpstreamError, err, fmt.Sprintf("MCP server '%s' discovery failed: %v", srv.Name, err))
}
