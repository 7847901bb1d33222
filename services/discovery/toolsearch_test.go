package discovery_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

func search(t *testing.T, b *testkit.Bus, req bus.ToolsSearchRequest) bus.ToolsSearchReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := bus.Request[bus.ToolsSearchReply](ctx, b.NC, b.Names.ToolsSearch(), req)
	if err != nil {
		t.Fatalf("tools.search %q: %v", req.Query, err)
	}
	return r
}

func searchNames(r bus.ToolsSearchReply) []string {
	out := []string{}
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestToolSearchDefersAndPromotes(t *testing.T) {
	t.Parallel()
	pg := newFake(t, fakeTool{Name: "query", Description: "Run SQL"}, fakeTool{Name: "schema", Description: "Describe tables"})
	gh := newFake(t, fakeTool{Name: "issues", Description: "List issues"}, fakeTool{Name: "api", Description: "Raw API"})
	b := startWith(t, cfgOf(
		srvJSON{"pg", httpServer(pg.URL, `"routing": {"mode": "prefer", "priority": 80, "keywords": ["orders", " SQL "]},
			"tools": {"schema": {"routing": {"priority": 90, "keywords": ["table"]}}}`)},
		srvJSON{"gh", httpServer(gh.URL, `"tools": {"api": {"routing": {"mode": "prefer", "priority": 10, "keywords": ["api"]}}}`)},
	), discovery.Config{ToolSearch: config.ToolSearch{Enabled: true, AutoPromoteTopK: 9}})

	r := mustList(t, b)
	if len(r.Tools) != 4 || len(r.Bind) != 0 || len(r.Promoted) != 0 {
		t.Fatalf("everything deferred: tools %v, bind %v, promoted %v", names(r), r.Bind, r.Promoted)
	}
	for _, tl := range r.Tools {
		if !tl.Deferred {
			t.Errorf("%s is not deferred", tl.Name)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(r.CatalogHash) {
		t.Errorf("catalog_hash = %q", r.CatalogHash)
	}
	if want := "<available-deferred-tools>\ngh_api\ngh_issues\npg_query\npg_schema\n</available-deferred-tools>"; r.DeferredSection != want {
		t.Errorf("deferred_section = %q, want %q", r.DeferredSection, want)
	}
	wantHints := "<mcp_routing_hints>\n" +
		"When the user's request involves table:\n  use `tool_search` to fetch `pg_schema`, then prefer that MCP tool.\n" +
		"When the user's request involves orders, or SQL:\n  use `tool_search` to fetch `pg_query`, then prefer that MCP tool.\n" +
		"When the user's request involves api:\n  use `tool_search` to fetch `gh_api`, then prefer that MCP tool.\n" +
		"</mcp_routing_hints>"
	if r.RoutingHints != wantHints {
		t.Errorf("routing_hints:\n%s\nwant:\n%s", r.RoutingHints, wantHints)
	}

	// Auto-promote from the latest user message: casefolded substring ("api"
	// in "RAPIDLY"), priority order, top_k clamped to 5; an incoming
	// promotion is kept first, and one for an unknown tool dropped.
	r, err := listReq(t, b, bus.ToolsListRequest{LatestUserMessage: "List the ORDERS TABLE rapidly", Promoted: []string{"gh_issues", "gone_tool"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gh_issues", "pg_schema", "pg_query", "gh_api"}; !slices.Equal(r.Promoted, want) {
		t.Errorf("promoted = %v, want %v", r.Promoted, want)
	}
	if want := []string{"pg_query", "pg_schema", "gh_api", "gh_issues"}; !slices.Equal(r.Bind, want) {
		t.Errorf("bind = %v, want %v (catalog order)", r.Bind, want)
	}

	// tools.search: the three forms, promotions merged into the state given.
	s := search(t, b, bus.ToolsSearchRequest{Query: "select:pg_query,gh_api", Promoted: []string{"gh_issues"}})
	if !slices.Equal(searchNames(s), []string{"pg_query", "gh_api"}) || !slices.Equal(s.Promoted, []string{"gh_issues", "pg_query", "gh_api"}) {
		t.Errorf("select: tools %v, promoted %v", searchNames(s), s.Promoted)
	}
	if len(s.Tools) > 0 && string(s.Tools[0].InputSchema) == "" {
		t.Error("search results carry no schema")
	}
	if s := search(t, b, bus.ToolsSearchRequest{Query: "+pg sql"}); !slices.Equal(searchNames(s), []string{"pg_query", "pg_schema"}) {
		t.Errorf("+pg sql: %v", searchNames(s))
	}
	if s := search(t, b, bus.ToolsSearchRequest{Query: "ISSUE"}); !slices.Equal(searchNames(s), []string{"gh_issues"}) || s.CatalogHash != r.CatalogHash {
		t.Errorf("regex: %v (hash %s)", searchNames(s), s.CatalogHash)
	}
	s = search(t, b, bus.ToolsSearchRequest{Query: "nothing here", Promoted: []string{"pg_query"}})
	if len(s.Tools) != 0 || s.Message != "No tools found matching: nothing here" || !slices.Equal(s.Promoted, []string{"pg_query"}) {
		t.Errorf("no match: %+v", s)
	}
	if _, err := bus.Request[bus.ToolsSearchReply](context.Background(), b.NC, b.Names.ToolsSearch(), bus.ToolsSearchRequest{}); err == nil || !strings.Contains(err.Error(), "query") {
		t.Errorf("empty query: err = %v, want invalid_request", err)
	}
}
