package discovery

import (
	"encoding/json"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// topK is tool_search.auto_promote_top_k clamped to 1..5 (default 3).
func (c *catalog) topK() int {
	if c.ts.AutoPromoteTopK == 0 {
		return 3
	}
	return min(max(c.ts.AutoPromoteTopK, 1), 5)
}

// validPromoted keeps the deferred names of this catalog, once each, in
// order: promotions of tools no longer in the catalog are dropped.
func (c *catalog) validPromoted(names []string) []string {
	out := []string{}
	for _, n := range names {
		if c.deferred[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// plain reports a request whose reply depends on the catalog only.
func plain(req bus.ToolsListRequest) bool {
	return len(req.Promoted) == 0 && req.LatestUserMessage == ""
}

// reply is the agent-facing catalog for req: the promotion state merged
// with auto-promotions from the latest user message, and the names to bind
// (not deferred, or promoted).
func (c *catalog) reply(req bus.ToolsListRequest) bus.ToolsListReply {
	promoted := c.validPromoted(req.Promoted)
	if c.ts.Enabled && req.LatestUserMessage != "" {
		promoted = mergePromoted(promoted, autoPromote(c.agent, req.LatestUserMessage, c.topK()))
	}
	bind := []string{}
	for _, t := range c.agent {
		if !t.Deferred || slices.Contains(promoted, t.Name) {
			bind = append(bind, t.Name)
		}
	}
	return bus.ToolsListReply{
		Generation: c.gen, CatalogHash: c.hash, Tools: c.agent, Bind: bind, Promoted: promoted,
		RoutingHints: c.hints, DeferredSection: c.deferredSection, FailedServers: c.failed,
	}
}

// plainReplyBytes is the encoded reply to a plain request, built once.
func (c *catalog) plainReplyBytes() []byte {
	c.listOnce.Do(func() { c.listBytes, _ = json.Marshal(c.reply(bus.ToolsListRequest{})) })
	return c.listBytes
}

// full is the whole catalog, internal task tools included, for toolcall.
func (c *catalog) full() bus.ToolsListReply {
	return bus.ToolsListReply{Generation: c.gen, CatalogHash: c.hash, Tools: c.all, Bind: []string{}, Promoted: []string{},
		RoutingHints: c.hints, DeferredSection: c.deferredSection, FailedServers: c.failed}
}

// fullReplyBytes is the encoded full catalog, built once.
func (c *catalog) fullReplyBytes() []byte {
	c.fullOnce.Do(func() { c.fullBytes, _ = json.Marshal(c.full()) })
	return c.fullBytes
}

// search answers mcpbus.tools.search: matches among the agent's tools, and
// the promotion state with the deferred matches merged in.
func (c *catalog) search(req bus.ToolsSearchRequest) bus.ToolsSearchReply {
	found := searchTools(c.agent, req.Query)
	var names []string
	for _, t := range found {
		if t.Deferred {
			names = append(names, t.Name)
		}
	}
	out := bus.ToolsSearchReply{CatalogHash: c.hash, Tools: found, Promoted: mergePromoted(c.validPromoted(req.Promoted), names)}
	if len(found) == 0 {
		out.Tools = []bus.Tool{}
		out.Message = "No tools found matching: " + req.Query
	}
	return out
}
