package discovery

import (
	"cmp"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// effectiveRouting applies tools.<raw name>.routing over the server's
// routing: an override replaces only the fields it sets, so with the server
// mode off a tool must set mode "prefer" itself. Priority was clamped to
// 0..100 (with a warning) when the config was parsed. It returns nil when
// the effective mode is off.
func effectiveRouting(srv *config.Server, rawName string) *bus.Routing {
	r := srv.Routing
	if ov, ok := srv.Tools[rawName]; ok && ov.Routing != nil {
		if ov.Routing.Mode != nil {
			r.Mode = *ov.Routing.Mode
		}
		if ov.Routing.Priority != nil {
			r.Priority = *ov.Routing.Priority
		}
		if ov.Routing.Keywords != nil {
			r.Keywords = *ov.Routing.Keywords
		}
	}
	if r.Mode != config.RoutingPrefer {
		return nil
	}
	return &bus.Routing{Mode: r.Mode, Priority: min(max(r.Priority, 0), 100), Keywords: slices.Clone(nonNil(r.Keywords))}
}

// hintKeywords are a tool's routing keywords stripped of surrounding space,
// empty ones dropped; nil when the tool gives no hint (mode off or no
// keyword left).
func hintKeywords(t bus.Tool) []string {
	if t.Routing == nil || t.Routing.Mode != config.RoutingPrefer {
		return nil
	}
	var out []string
	for _, k := range t.Routing.Keywords {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// byPriorityThenName orders tools by (-priority, visible name), the order of
// both hints and auto-promotion.
func byPriorityThenName(a, b bus.Tool) int {
	return cmp.Or(cmp.Compare(b.Routing.Priority, a.Routing.Priority), strings.Compare(a.Name, b.Name))
}

// routingHints renders the <mcp_routing_hints> section (reference §2.4):
// one entry per tool with mode prefer and keywords, highest priority first
// then by name, lines joined by "\n" without a trailing newline; a deferred
// tool tells the model to fetch it with tool_search first. No qualifying
// tool gives "".
func routingHints(tools []bus.Tool) string {
	var hinted []bus.Tool
	for _, t := range tools {
		if len(hintKeywords(t)) > 0 {
			hinted = append(hinted, t)
		}
	}
	if len(hinted) == 0 {
		return ""
	}
	slices.SortStableFunc(hinted, byPriorityThenName)
	lines := []string{"<mcp_routing_hints>"}
	for _, t := range hinted {
		kw := make([]string, 0, len(t.Routing.Keywords))
		for _, k := range hintKeywords(t) {
			kw = append(kw, escapeHTML(k))
		}
		name := escapeHTML(t.Name)
		lines = append(lines, "When the user's request involves "+joinKeywords(kw)+":")
		if t.Deferred {
			lines = append(lines, "  use `tool_search` to fetch `"+name+"`, then prefer that MCP tool.")
		} else {
			lines = append(lines, "  prefer the `"+name+"` tool.")
		}
	}
	lines = append(lines, "</mcp_routing_hints>")
	return strings.Join(lines, "\n")
}

// joinKeywords renders "a", "a, or b", "a, b, or c": all but the last
// joined by ", ", then ", or " and the last.
func joinKeywords(kw []string) string {
	if len(kw) == 1 {
		return kw[0]
	}
	return strings.Join(kw[:len(kw)-1], ", ") + ", or " + kw[len(kw)-1]
}

// htmlEscaper escapes &, < and > like Python's html.escape(s, quote=False).
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escapeHTML escapes &, < and > (quotes are left alone).
func escapeHTML(s string) string { return htmlEscaper.Replace(s) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
