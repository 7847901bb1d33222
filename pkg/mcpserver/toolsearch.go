package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// ToolSearchName is the tool listed when the catalog defers tools
// (tool_search.enabled): its call promotes the deferred tools it finds for
// the caller's (user, thread).
const ToolSearchName = "tool_search"

var toolSearchTool = mcpTool{
	Name: ToolSearchName,
	Description: "Search the deferred MCP tools and load the ones found: they are listed (tools/list) and callable " +
		"from then on in this thread. query is \"select:name1,name2\" for exact names, \"+word rest\" for names " +
		"containing word ranked by the rest, or a case-insensitive regular expression over names and descriptions.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"select:a,b | +word rest | a regular expression"}},"required":["query"]}`),
}

// promotionKey is the bucket key of (user, thread): a digest, so neither
// needs to be a valid key.
func promotionKey(user, thread string) string {
	var b [192]byte // on the stack for the usual lengths
	return bus.DigestBytes(append(append(append(b[:0], user...), 0), thread...))
}

type promotionRecord struct {
	Promoted []string `json:"promoted"`
}

// promoted is what tool_search promoted for the caller's thread (none
// without a promotion bucket or when it cannot be read: the catalog is
// still served, without them). It reads the mirror of the bucket
// (Server.Start), which answers a thread without promotions without a read
// of the bucket.
func (s *Server) promoted(ctx context.Context, x *Exchange) []string {
	if s.promotions == nil {
		return nil
	}
	rec, ok, err := s.promotions.Get(ctx, promotionKey(x.UserID, x.Thread()))
	if err != nil {
		s.log.Warn("tool_search promotions not read", observability.Err(err))
		return nil
	}
	if !ok {
		return nil
	}
	return rec.Promoted
}

// PromotionAnnounced drops what the promotion mirror holds for (user,
// thread): another replica announced a promotion there
// (InternalMCPPromoted), which its watch may not have delivered yet.
func (s *Server) PromotionAnnounced(user, thread string) {
	if s.promotions != nil {
		s.promotions.Invalidate(promotionKey(user, thread))
	}
}

// toolSearch is a tools/call of tool_search: mcpbus.tools.search with the
// thread's promotions, the new promotion state stored for every replica
// and, when it grew, announced so the caller's streams get list_changed.
func (s *Server) toolSearch(ctx context.Context, x *Exchange, args json.RawMessage) (any, *Error) {
	var p struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(orEmpty(args), &p); err != nil || p.Query == "" {
		return nil, Errorf(CodeInvalidParams, "tool_search arguments: query is required (a string)")
	}
	if s.deps.Promotions == nil {
		return nil, Errorf(CodeInternalError, "tool_search is not available here: promotions cannot be kept")
	}
	before := s.promoted(ctx, x)
	bctx, cancel := s.busCtx(ctx, x)
	defer cancel()
	reply, err := bus.Request[bus.ToolsSearchReply](bctx, s.deps.NC, s.deps.Names.ToolsSearch(), bus.ToolsSearchRequest{
		Query: p.Query, UserID: x.UserID, ThreadID: x.Thread(), Promoted: before, VirtualServer: x.VirtualServer,
	})
	if err != nil {
		if res, ok := refusal(err); ok {
			return res, nil
		}
		return nil, s.busError(err, "tool_search")
	}
	if grew(before, reply.Promoted) {
		rec := promotionRecord{Promoted: reply.Promoted}
		raw, _ := json.Marshal(rec)
		if err := s.promotions.Put(bctx, promotionKey(x.UserID, x.Thread()), raw, rec); err != nil {
			return nil, s.busError(fmt.Errorf("store tool_search promotions: %w", err), "tool_search")
		}
		ev, _ := json.Marshal(bus.ToolsSearchRequest{UserID: x.UserID, ThreadID: x.Thread()})
		if err := s.deps.NC.Publish(s.deps.Names.InternalMCPPromoted(), ev); err != nil {
			s.log.Warn("tool_search promotion not announced", observability.Err(err))
		}
	}
	type found struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	out := struct {
		Tools   []found `json:"tools"`
		Message string  `json:"message,omitempty"`
	}{Tools: []found{}, Message: reply.Message}
	for _, t := range reply.Tools {
		out.Tools = append(out.Tools, found{Name: t.Name, Description: t.Description, InputSchema: orObject(t.InputSchema)})
	}
	body, _ := json.Marshal(out)
	text, _ := json.Marshal(map[string]string{"type": "text", "text": string(body)})
	return callResult{Content: []json.RawMessage{text}, StructuredContent: body}, nil
}

// grew reports names in after that before lacks.
func grew(before, after []string) bool {
	for _, n := range after {
		if !slices.Contains(before, n) {
			return true
		}
	}
	return false
}
