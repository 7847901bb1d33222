package discovery

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

func toolNamed(name, desc string) bus.Tool {
	return bus.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`), Deferred: true}
}

func namesOf(tools []bus.Tool) []string {
	out := []string{}
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func TestSearchToolsQueryForms(t *testing.T) {
	tools := []bus.Tool{
		toolNamed("gh_create_issue", "Create an issue"),
		toolNamed("gh_list_issues", "List issues; issue search"),
		toolNamed("pg_query", "Run a SQL query against the issue tracker database"),
		toolNamed("web_search", "Search the web"),
		toolNamed("web_fetch", "Fetch a page"),
		toolNamed("a1_issue", "x"), toolNamed("a2_issue", "x"), toolNamed("a3_issue", "x"), toolNamed("a4_issue", "x"),
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		// Exactly those names, in query order, unknown names ignored, no cap.
		{"select:web_fetch, pg_query,nope,web_fetch", []string{"web_fetch", "pg_query"}},
		// Names containing "gh", ranked by hits of "issue" in "name description".
		{"+gh issue", []string{"gh_list_issues", "gh_create_issue"}},
		{"+WEB", []string{"web_search", "web_fetch"}},
		// Regex: name hits (2) before description hits (1), stable, top 5.
		{"issue", []string{"gh_create_issue", "gh_list_issues", "a1_issue", "a2_issue", "a3_issue"}},
		{"SQL|fetch", []string{"web_fetch", "pg_query"}},
		// An invalid regex is matched literally.
		{"search(", []string{}},
		{"nothing-matches", []string{}},
	} {
		if got := namesOf(searchTools(tools, c.query)); !slices.Equal(got, c.want) {
			t.Errorf("search %q = %v, want %v", c.query, got, c.want)
		}
	}
}

func TestAutoPromote(t *testing.T) {
	tools := []bus.Tool{
		prefer("pg_query", 100, true, "orders table", "SQL"),
		prefer("pg_schema", 50, true, "Schema"),
		prefer("api_tool", 10, true, "api"),
		prefer("zz_tool", 50, true, "ß"),
		prefer("bound", 100, false, "orders"), // not deferred: never promoted
	}
	if got := autoPromote(tools, "Show the ORDERS TABLE schema, rapidly", 3); !slices.Equal(got, []string{"pg_query", "pg_schema", "api_tool"}) {
		t.Errorf("auto-promote = %v", got)
	}
	if got := autoPromote(tools, "Show the ORDERS TABLE schema, rapidly", 1); !slices.Equal(got, []string{"pg_query"}) {
		t.Errorf("auto-promote top 1 = %v", got)
	}
	// Casefolding: "SS" folds like "ß".
	if got := autoPromote(tools, "STRASSE", 5); !slices.Equal(got, []string{"zz_tool"}) {
		t.Errorf("casefolded match = %v, want zz_tool", got)
	}
	if got := autoPromote(tools, "   ", 5); len(got) != 0 {
		t.Errorf("blank message promoted %v", got)
	}
}

func TestMergePromotedIsOrderedUnion(t *testing.T) {
	if got := mergePromoted([]string{"b", "a"}, []string{"a", "c", "b", "d"}); !slices.Equal(got, []string{"b", "a", "c", "d"}) {
		t.Errorf("merge = %v", got)
	}
}

func TestCatalogHashAndDeferredSection(t *testing.T) {
	a := bus.Tool{Name: "b<tool>", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"},"a":{"type":"number"}}}`), Deferred: true}
	b := bus.Tool{Name: "a_tool", Description: "d", InputSchema: json.RawMessage(`{"properties":{"a":{"type":"number"},"x":{"type":"string"}},"type":"object"}`), Deferred: true}
	h1 := catalogHash([]bus.Tool{a, b})
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(h1) {
		t.Fatalf("catalog hash %q is not 16 hex characters", h1)
	}
	// Order of tools and of schema keys does not matter; content does.
	if h2 := catalogHash([]bus.Tool{b, a}); h2 != h1 {
		t.Errorf("hash depends on tool order: %s vs %s", h1, h2)
	}
	b.Description = "changed"
	if h3 := catalogHash([]bus.Tool{a, b}); h3 == h1 {
		t.Error("hash ignores a description change")
	}
	want := "<available-deferred-tools>\na_tool\nb&lt;tool&gt;\n</available-deferred-tools>"
	if got := deferredSection([]bus.Tool{a, b}); got != want {
		t.Errorf("deferred section = %q, want %q", got, want)
	}
	a.Deferred, b.Deferred = false, false
	if got := deferredSection([]bus.Tool{a, b}); got != "" {
		t.Errorf("nothing deferred: section = %q", got)
	}
}
