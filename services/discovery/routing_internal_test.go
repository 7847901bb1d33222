package discovery

import (
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

func prefer(name string, priority int, deferred bool, keywords ...string) bus.Tool {
	return bus.Tool{Name: name, Deferred: deferred, Routing: &bus.Routing{Mode: "prefer", Priority: priority, Keywords: keywords}}
}

func TestRoutingHintsExactText(t *testing.T) {
	tools := []bus.Tool{
		{Name: "plain_tool"}, // no routing: no hint
		prefer("web_search", 10, false, "news"),
		prefer("pg_query", 100, false, "query database", "orders <table>", "R&D"),
		prefer("pg_schema", 50, true, "top", "SQL"),
		prefer("empty_kw", 90, false, " ", ""), // keywords that strip to nothing: no hint
		prefer("a_tie", 10, false, "x"),        // same priority as web_search: by name
	}
	want := "<mcp_routing_hints>\n" +
		"When the user's request involves query database, orders &lt;table&gt;, or R&amp;D:\n" +
		"  prefer the `pg_query` tool.\n" +
		"When the user's request involves top, or SQL:\n" +
		"  use `tool_search` to fetch `pg_schema`, then prefer that MCP tool.\n" +
		"When the user's request involves x:\n" +
		"  prefer the `a_tie` tool.\n" +
		"When the user's request involves news:\n" +
		"  prefer the `web_search` tool.\n" +
		"</mcp_routing_hints>"
	if got := routingHints(tools); got != want {
		t.Errorf("hints:\n%s\nwant:\n%s", got, want)
	}
	if got := routingHints([]bus.Tool{{Name: "x"}, prefer("y", 1, false)}); got != "" {
		t.Errorf("no qualifying tool: hints = %q, want empty", got)
	}
}

func TestJoinKeywords(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"a"}, "a"},
		{[]string{"top", "SQL"}, "top, or SQL"},
		{[]string{"a", "b", "c"}, "a, b, or c"},
		{[]string{`"quoted"`, "d"}, `"quoted", or d`},
	} {
		if got := joinKeywords(c.in); got != c.want {
			t.Errorf("joinKeywords(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEffectiveRoutingInheritance(t *testing.T) {
	mode, prio := "prefer", 100
	kw := []string{"query database"}
	srv := &config.Server{
		Routing: config.Routing{Mode: "off", Priority: 50, Keywords: []string{"orders"}},
		Tools: map[string]config.ToolOverride{
			"query":  {Routing: &config.RoutingOverride{Mode: &mode, Priority: &prio, Keywords: &kw}},
			"schema": {Routing: &config.RoutingOverride{Priority: &prio}}, // inherits off
			"tables": {Routing: &config.RoutingOverride{Mode: &mode}},     // inherits priority and keywords
		},
	}
	if r := effectiveRouting(srv, "query"); r == nil || r.Priority != 100 || len(r.Keywords) != 1 || r.Keywords[0] != "query database" {
		t.Errorf("query routing = %+v", r)
	}
	if r := effectiveRouting(srv, "schema"); r != nil {
		t.Errorf("schema sets only priority under a server mode off: routing = %+v, want none", r)
	}
	if r := effectiveRouting(srv, "tables"); r == nil || r.Priority != 50 || r.Keywords[0] != "orders" {
		t.Errorf("tables routing = %+v, want prefer with the server's priority and keywords", r)
	}
	if r := effectiveRouting(srv, "other"); r != nil {
		t.Errorf("other routing = %+v, want none (server mode off)", r)
	}
}
