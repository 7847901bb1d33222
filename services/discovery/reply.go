package discovery

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// plain reports a request whose reply depends on the catalog (and the
// page asked for) only.
func plain(req bus.ToolsListRequest) bool {
	return len(req.Promoted) == 0 && req.LatestUserMessage == ""
}

// listing is what one endpoint shows of a catalog.
type listing int

const (
	// agentListing is mcpbus.tools.list: the agent's tools and the names
	// to bind.
	agentListing listing = iota
	// fullListing is the internal catalog, for toolcall: every tool,
	// internal task tools included, nothing to bind.
	fullListing
)

func (c *catalog) toolsOf(l listing) []bus.Tool {
	if l == fullListing {
		return c.all
	}
	return c.agent
}

// sizesOf is the encoded size of each of l's tools, computed once.
func (c *catalog) sizesOf(l listing) []int {
	c.sizesOnce.Do(func() {
		c.sizes[agentListing] = encodedSizes(c.agent)
		c.sizes[fullListing] = encodedSizes(c.all)
	})
	return c.sizes[l]
}

func encodedSizes(tools []bus.Tool) []int {
	out := make([]int, len(tools))
	for i, t := range tools {
		b, _ := json.Marshal(t)
		out[i] = len(b) + 1 // and its comma
	}
	return out
}

// answer is the reply to req on l: the whole catalog, or the page req
// asks for. maxPayload is the most one message on the bus may hold: a
// page stays under half of it, and a whole catalog that would not fit is
// refused (the caller must page).
func (c *catalog) answer(l listing, req bus.ToolsListRequest, maxPayload int) (bus.ToolsListReply, error) {
	if req.Tool != "" {
		return c.lookup(l, req), nil
	}
	if !req.Paged() {
		if err := c.fits(l, maxPayload); err != nil {
			return bus.ToolsListReply{}, err
		}
		return c.whole(l, req), nil
	}
	tools, sizes := c.toolsOf(l), c.sizesOf(l)
	off, err := c.offsetOf(req.Cursor, len(tools))
	if err != nil {
		return bus.ToolsListReply{}, err
	}
	budget := maxPayload/2 - len(c.failedBytes())
	if off == 0 {
		budget -= len(c.hints) + len(c.deferredSection)
	}
	end, used := off, 0
	for end < len(tools) && end-off < req.PageSize && (end == off || used+sizes[end] <= budget) {
		used += sizes[end]
		end++
	}
	out := c.header(l, req)
	out.Tools = tools[off:end]
	out.Bind = bindOf(out.Tools, l, out.Promoted)
	if off > 0 {
		out.RoutingHints, out.DeferredSection = "", ""
	}
	if end < len(tools) {
		out.NextCursor = c.cursorAt(end)
	}
	return out, nil
}

// lookup is the reply to a lookup of one tool on l (req.Tool): that tool
// alone, found in the listing's index (built once per catalog), or no
// tool. Routing hints and the deferred section are for listings only.
func (c *catalog) lookup(l listing, req bus.ToolsListRequest) bus.ToolsListReply {
	out := c.header(l, req)
	out.RoutingHints, out.DeferredSection = "", ""
	c.indexOnce[l].Do(func() {
		tools := c.toolsOf(l)
		c.index[l] = make(map[string]int, len(tools))
		for i, t := range tools {
			c.index[l][t.Name] = i
		}
	})
	if i, ok := c.index[l][req.Tool]; ok {
		out.Tools = c.toolsOf(l)[i : i+1]
		out.Bind = bindOf(out.Tools, l, out.Promoted)
	}
	return out
}

// whole is the unpaged reply to req on l.
func (c *catalog) whole(l listing, req bus.ToolsListRequest) bus.ToolsListReply {
	out := c.header(l, req)
	out.Tools = c.toolsOf(l)
	out.Bind = bindOf(out.Tools, l, out.Promoted)
	return out
}

// header is the reply to req on l without its tools: for the agent, the
// promotion state merged with auto-promotions from the latest user
// message.
func (c *catalog) header(l listing, req bus.ToolsListRequest) bus.ToolsListReply {
	out := bus.ToolsListReply{Generation: c.gen, CatalogHash: c.hash, Revision: c.revision, Tools: []bus.Tool{},
		Bind: []string{}, Promoted: []string{}, RoutingHints: c.hints, DeferredSection: c.deferredSection, FailedServers: c.failed}
	if l == agentListing {
		out.Promoted = c.validPromoted(req.Promoted)
		if c.ts.Enabled && req.LatestUserMessage != "" {
			out.Promoted = mergePromoted(out.Promoted, autoPromote(c.agent, req.LatestUserMessage, c.topK()))
		}
	}
	return out
}

// bindOf is the names of tools to bind on l (none on the full listing):
// not deferred, or promoted.
func bindOf(tools []bus.Tool, l listing, promoted []string) []string {
	bind := []string{}
	if l != agentListing {
		return bind
	}
	set := make(map[string]bool, len(promoted))
	for _, n := range promoted {
		set[n] = true
	}
	for _, t := range tools {
		if !t.Deferred || set[t.Name] {
			bind = append(bind, t.Name)
		}
	}
	return bind
}

// fits refuses a whole catalog on l that would not fit in one message.
func (c *catalog) fits(l listing, maxPayload int) error {
	size := len(c.hints) + len(c.deferredSection) + len(c.failedBytes()) + 1024
	for _, n := range c.sizesOf(l) {
		size += n
	}
	if maxPayload > 0 && size > maxPayload {
		return bus.Errorf(bus.CodeInvalidRequest, "the catalog (%d tools, about %d bytes) is larger than one message on the bus (max_payload %d bytes): ask for it in pages (page_size, cursor)",
			len(c.toolsOf(l)), size, maxPayload)
	}
	return nil
}

// failedBytes is failed_servers encoded, once.
func (c *catalog) failedBytes() []byte {
	c.failedOnce.Do(func() { c.failedJSON, _ = json.Marshal(c.failed) })
	return c.failedJSON
}

// A cursor is opaque to callers: the catalog's generation and revision
// prefix, and the offset of the page's first tool.
const cursorRevision = 16

func (c *catalog) cursorAt(off int) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%s.%d", c.gen, c.revision[:cursorRevision], off))
}

// offsetOf reads a cursor of this catalog's listing of n tools ("" is the
// first page). A
// cursor of another catalog is CatalogChanged; one that is not a cursor is
// an invalid request naming the field.
func (c *catalog) offsetOf(cursor string, n int) (int, error) {
	if cursor == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	parts := strings.Split(string(raw), ".")
	if err != nil || len(parts) != 3 {
		return 0, bus.Errorf(bus.CodeInvalidRequest, "cursor: not one this service issued; list again from the first page")
	}
	gen, gerr := strconv.ParseInt(parts[0], 10, 64)
	off, oerr := strconv.Atoi(parts[2])
	if gerr != nil || oerr != nil || off < 0 {
		return 0, bus.Errorf(bus.CodeInvalidRequest, "cursor: not one this service issued; list again from the first page")
	}
	if gen != c.gen || parts[1] != c.revision[:cursorRevision] || off > n {
		return 0, bus.CatalogChanged(c.gen)
	}
	return off, nil
}

// encoded is answer encoded, for a plain request: a whole catalog's
// reply is encoded once per catalog, a page's now.
func (c *catalog) encoded(l listing, req bus.ToolsListRequest, maxPayload int) ([]byte, error) {
	if !req.Paged() && req.Tool == "" {
		if err := c.fits(l, maxPayload); err != nil {
			return nil, err
		}
		return c.wholeBytes(l), nil
	}
	reply, err := c.answer(l, req, maxPayload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

// wholeBytes is the encoded unpaged reply to a plain request on l, built
// once.
func (c *catalog) wholeBytes(l listing) []byte {
	c.wholeOnce[l].Do(func() { c.wholeJSON[l], _ = json.Marshal(c.whole(l, bus.ToolsListRequest{})) })
	return c.wholeJSON[l]
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
