package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// maxListPage bounds ?limit= of the paged lists (tools, resources,
// prompts).
const maxListPage = 500

// listPage is ?search=, ?offset= and ?limit= of GET /api/mcp/tools,
// /api/mcp/resources and /api/mcp/prompts: one page of the entries whose
// text contains search (case-insensitive), so that a browser never
// receives a whole catalog of thousands of entries.
type listPage struct {
	needle        string
	offset, limit int
}

// pageCounts are the fields a paged reply adds.
type pageCounts struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// pageOf reads the page parameters; ok is false when the request has
// none of them (the whole list is answered, as before paging existed).
// offset defaults to 0, limit to 50 (1..500).
func pageOf(c echo.Context) (p listPage, ok bool, err error) {
	q := c.QueryParams()
	if !q.Has("search") && !q.Has("limit") && !q.Has("offset") {
		return p, false, nil
	}
	p.limit = 50
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, true, bus.Errorf(bus.CodeInvalidRequest, "offset must be a whole number from 0")
		}
		p.offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListPage {
			return p, true, bus.Errorf(bus.CodeInvalidRequest, "limit must be from 1 to %d", maxListPage)
		}
		p.limit = n
	}
	p.needle = strings.ToLower(strings.TrimSpace(q.Get("search")))
	return p, true, nil
}

// matching keeps the items one of whose texts contains the search (an
// empty list, never nil: the reply has [], not null).
func matching[T any](p listPage, items []T, texts func(T) []string) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if p.matches(texts(it)...) {
			out = append(out, it)
		}
	}
	return out
}

func (p listPage) matches(texts ...string) bool {
	if p.needle == "" {
		return true
	}
	for _, t := range texts {
		if strings.Contains(strings.ToLower(t), p.needle) {
			return true
		}
	}
	return false
}

// window is the page's part of a list of n matches that starts at
// position from of the whole matched sequence: [start, end) within it.
func (p listPage) window(from, n int) (start, end int) {
	lo, hi := p.offset-from, p.offset+p.limit-from
	return min(max(lo, 0), n), min(max(hi, 0), n)
}

func (p listPage) counts(total int) pageCounts {
	return pageCounts{Total: total, Offset: p.offset, Limit: p.limit}
}

// toolsPage is GET /api/mcp/tools with search, offset or limit: the
// catalog reply with one page of the matching tools and their total.
type toolsPage struct {
	*bus.ToolsListReply
	pageCounts
}

// pageTools answers one page of the tools whose name, server or
// description contains the search.
func pageTools(c echo.Context, p listPage, reply *bus.ToolsListReply) error {
	matched := matching(p, reply.Tools, func(t bus.Tool) []string { return []string{t.Name, t.Server, t.Description} })
	start, end := p.window(0, len(matched))
	reply.Tools = matched[start:end]
	return c.JSON(http.StatusOK, toolsPage{ToolsListReply: reply, pageCounts: p.counts(len(matched))})
}

// resourcesPage is GET /api/mcp/resources with search, offset or limit:
// the matching resources then the matching templates are one sequence;
// the page holds its part of each, total counts both.
type resourcesPage struct {
	resourcesReply
	pageCounts
}

func pageResources(c echo.Context, p listPage, reply resourcesReply) error {
	res := matching(p, reply.Resources, func(r bus.Resource) []string {
		return []string{r.URI, r.Name, r.Title, r.Description, r.Server}
	})
	tpl := matching(p, reply.ResourceTemplates, func(r bus.ResourceTemplate) []string {
		return []string{r.URITemplate, r.Name, r.Title, r.Description, r.Server}
	})
	rs, re := p.window(0, len(res))
	ts, te := p.window(len(res), len(tpl))
	reply.Resources, reply.ResourceTemplates = res[rs:re], tpl[ts:te]
	return c.JSON(http.StatusOK, resourcesPage{resourcesReply: reply, pageCounts: p.counts(len(res) + len(tpl))})
}

// promptsPage is GET /api/mcp/prompts with search, offset or limit.
type promptsPage struct {
	*bus.PromptsListReply
	pageCounts
}

func pagePrompts(c echo.Context, p listPage, reply *bus.PromptsListReply) error {
	matched := matching(p, reply.Prompts, func(r bus.Prompt) []string { return []string{r.Name, r.Title, r.Description, r.Server} })
	start, end := p.window(0, len(matched))
	reply.Prompts = matched[start:end]
	return c.JSON(http.StatusOK, promptsPage{PromptsListReply: reply, pageCounts: p.counts(len(matched))})
}
