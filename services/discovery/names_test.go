package discovery_test

import (
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

func TestNamesPrefixRuleAndRoutingBySource(t *testing.T) {
	t.Parallel()
	web := newFake(t, fakeTool{Name: "search"}, fakeTool{Name: "scraper_search"}, fakeTool{Name: "bad.name"}, fakeTool{Name: strings.Repeat("x", 125)})
	scraper := newFake(t, fakeTool{Name: "search"}, fakeTool{Name: "fetch"})
	raw := newFake(t, fakeTool{Name: "raw_search"}, fakeTool{Name: "web_search"})
	dotted := newFake(t, fakeTool{Name: "ok"})
	b := start(t, cfgOf(
		srvJSON{"web", httpServer(web.URL, "")},
		srvJSON{"web_scraper", httpServer(scraper.URL, "")},
		srvJSON{"raw", httpServer(raw.URL, `"tool_name_prefix": false`)},
		srvJSON{"my.server", httpServer(dotted.URL, "")},
	))
	r := mustList(t, b)
	// web: "bad.name" and the 129-character name are dropped, siblings kept.
	// web_scraper_search clashes: web (first in config order) wins.
	// raw: unprefixed; its web_search clashes with web's and loses.
	// my.server: a prefixed name with "." is invalid, so it has no tools.
	want := "web_scraper_search,web_search,web_scraper_fetch,raw_search" // mcp-go lists tools sorted by name
	if got := strings.Join(names(r), ","); got != want {
		t.Fatalf("catalog = %s, want %s", got, want)
	}
	for name, src := range map[string][2]string{
		"web_search":         {"web", "search"},
		"web_scraper_search": {"web", "scraper_search"},
		"web_scraper_fetch":  {"web_scraper", "fetch"},
		"raw_search":         {"raw", "raw_search"},
	} {
		if tl := findTool(t, r, name); tl.Server != src[0] || tl.OriginalName != src[1] {
			t.Errorf("%s routes to %s/%s, want %s/%s", name, tl.Server, tl.OriginalName, src[0], src[1])
		}
	}
	st := servers(t, b, bus.ServersRequest{NoRefresh: true})
	clashes := map[string]bus.NameClash{}
	for _, c := range st.Clashes {
		clashes[c.Name+"/"+c.Loser] = c
	}
	if c, ok := clashes["web_scraper_search/web_scraper"]; !ok || c.Winner != "web" {
		t.Errorf("clashes = %+v; want web_scraper_search won by web over web_scraper", st.Clashes)
	}
	if c, ok := clashes["web_search/raw"]; !ok || c.Winner != "web" || len(st.Clashes) != 2 {
		t.Errorf("clashes = %+v; want web_search won by web over raw, two clashes", st.Clashes)
	}
	counts := map[string]int{}
	for _, s := range st.Servers {
		counts[s.Name] = s.ToolCount
		if s.State != bus.ServerStateOK || s.Transport != "http" || !s.Enabled {
			t.Errorf("status %+v, want an enabled ok http server", s)
		}
	}
	if counts["web"] != 2 || counts["web_scraper"] != 1 || counts["raw"] != 1 || counts["my.server"] != 0 {
		t.Errorf("tool counts = %v", counts)
	}
}

func TestRoutingMetadataAndHintsInTheReply(t *testing.T) {
	t.Parallel()
	pg := newFake(t, fakeTool{Name: "query"}, fakeTool{Name: "schema"}, fakeTool{Name: "tables"})
	web := newFake(t, fakeTool{Name: "search"})
	b := start(t, cfgOf(
		srvJSON{"postgres", httpServer(pg.URL, `"routing": {"mode": "prefer", "priority": 50, "keywords": ["orders", "SQL"]},
			"tools": {"query": {"routing": {"priority": 150, "keywords": ["query database"]}}, "tables": {"routing": {"mode": "off"}}}`)},
		srvJSON{"web", httpServer(web.URL, `"routing": {"priority": 90, "keywords": ["news"]}`)},
	))
	r := mustList(t, b)
	q := findTool(t, r, "postgres_query")
	if q.Routing == nil || q.Routing.Priority != 100 || strings.Join(q.Routing.Keywords, ",") != "query database" {
		t.Errorf("postgres_query routing = %+v; want priority clamped to 100 and its own keywords", q.Routing)
	}
	if s := findTool(t, r, "postgres_schema"); s.Routing == nil || s.Routing.Priority != 50 {
		t.Errorf("postgres_schema routing = %+v; want the server's", s.Routing)
	}
	if tl := findTool(t, r, "postgres_tables"); tl.Routing != nil {
		t.Errorf("postgres_tables routing = %+v; want none (mode off)", tl.Routing)
	}
	if w := findTool(t, r, "web_search"); w.Routing != nil {
		t.Errorf("web_search routing = %+v; want none (server mode defaults to off)", w.Routing)
	}
	want := "<mcp_routing_hints>\n" +
		"When the user's request involves query database:\n  prefer the `postgres_query` tool.\n" +
		"When the user's request involves orders, or SQL:\n  prefer the `postgres_schema` tool.\n" +
		"</mcp_routing_hints>"
	if r.RoutingHints != want {
		t.Errorf("routing_hints:\n%s\nwant:\n%s", r.RoutingHints, want)
	}
	if r.DeferredSection != "" || len(r.Bind) != len(r.Tools) {
		t.Errorf("tool_search disabled: deferred section %q, bind %v", r.DeferredSection, r.Bind)
	}
}
