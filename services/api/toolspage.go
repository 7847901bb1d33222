package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// maxToolsPage bounds GET /api/mcp/tools?limit=.
const maxToolsPage = 500

// toolsPage is GET /api/mcp/tools with search, offset or limit: the
// catalog reply with one page of the matching tools and their total.
type toolsPage struct {
	*bus.ToolsListReply
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// pageTools answers one page of the tools whose name, server or
// description contains ?search= (case-insensitive), from ?offset=
// (default 0), ?limit= at a time (1..500, default 50), so that a browser
// never receives a whole catalog of thousands of tools.
func pageTools(c echo.Context, reply *bus.ToolsListReply) error {
	offset, limit := 0, 50
	if v := c.QueryParam("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return bus.Errorf(bus.CodeInvalidRequest, "offset must be a whole number from 0")
		}
		offset = n
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxToolsPage {
			return bus.Errorf(bus.CodeInvalidRequest, "limit must be from 1 to %d", maxToolsPage)
		}
		limit = n
	}
	needle := strings.ToLower(strings.TrimSpace(c.QueryParam("search")))
	matched := reply.Tools[:0:0]
	for _, t := range reply.Tools {
		if needle == "" || strings.Contains(strings.ToLower(t.Name), needle) || strings.Contains(strings.ToLower(t.Server), needle) ||
			strings.Contains(strings.ToLower(t.Description), needle) {
			matched = append(matched, t)
		}
	}
	page := toolsPage{ToolsListReply: reply, Total: len(matched), Offset: offset, Limit: limit}
	start, end := min(offset, len(matched)), min(offset+limit, len(matched))
	reply.Tools = matched[start:end]
	return c.JSON(http.StatusOK, page)
}
