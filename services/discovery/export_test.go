package discovery

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Lookup is the in-process lookup behind mcpbus.tools.list (the cache
// called directly, no bus), for the benchmark's comparison.
func (s *Service) Lookup(ctx context.Context, req bus.ToolsListRequest) (bus.ToolsListReply, error) {
	cat, err := s.catalog(ctx, req.UserID)
	if err != nil {
		return bus.ToolsListReply{}, err
	}
	return cat.whole(agentListing, req), nil
}
