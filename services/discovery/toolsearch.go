package discovery

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/text/cases"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// maxSearchResults caps the regex and "+required" query forms.
const maxSearchResults = 5

// catalogHash identifies the catalog's schemas (reference §2.5): the list of
// {name, schema} (schema as an OpenAI function: name, description,
// parameters) sorted by name, encoded with sorted keys, SHA-256, the first
// 16 hex characters. Promotions are only valid under the hash they were
// made with.
func catalogHash(tools []bus.Tool) string {
	type item struct {
		Name   string         `json:"name"`
		Schema map[string]any `json:"schema"`
	}
	items := make([]item, 0, len(tools))
	for _, t := range tools {
		var params any = map[string]any{}
		if len(t.InputSchema) > 0 {
			// Decoding into any makes the encoder sort every object's keys.
			_ = json.Unmarshal(t.InputSchema, &params)
		}
		items = append(items, item{Name: t.Name, Schema: map[string]any{
			"name": t.Name, "description": t.Description, "parameters": params,
		}})
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.Name, b.Name) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(items)
	sum := sha256.Sum256(bytes.TrimSpace(buf.Bytes()))
	return hex.EncodeToString(sum[:])[:16]
}

// deferredSection renders <available-deferred-tools> with the deferred
// names sorted and HTML-escaped, one per line; "" when nothing is deferred.
func deferredSection(tools []bus.Tool) string {
	var names []string
	for _, t := range tools {
		if t.Deferred {
			names = append(names, escapeHTML(t.Name))
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return "<available-deferred-tools>\n" + strings.Join(names, "\n") + "\n</available-deferred-tools>"
}

// mergePromoted is the ordered union of existing and incoming names.
func mergePromoted(existing, incoming []string) []string {
	out := slices.Clone(existing)
	for _, n := range incoming {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// casefold folds s for caseless matching (full Unicode case folding, like
// Python's str.casefold).
func casefold(s string) string { return cases.Fold().String(s) }

// autoPromote returns the deferred tools whose routing keywords occur in
// message (casefolded substring, so "api" matches "rapid"), by priority then
// name, at most topK.
func autoPromote(tools []bus.Tool, message string, topK int) []string {
	text := casefold(message)
	if strings.TrimSpace(text) == "" {
		return nil
	}
	var hits []bus.Tool
	for _, t := range tools {
		if !t.Deferred {
			continue
		}
		for _, k := range hintKeywords(t) {
			if strings.Contains(text, casefold(k)) {
				hits = append(hits, t)
				break
			}
		}
	}
	slices.SortStableFunc(hits, byPriorityThenName)
	var out []string
	for _, t := range hits[:min(len(hits), topK)] {
		out = append(out, t.Name)
	}
	return out
}

// searchTools runs a tool_search query over tools (reference §2.5):
//   - "select:a,b": exactly those names, in query order, no cap;
//   - "+req rest": names containing req (case-insensitive), ranked by the
//     number of matches of rest in "name description", top 5;
//   - anything else: a case-insensitive regular expression (matched
//     literally when invalid); a name match scores 2, a description match
//     1; stable order, top 5.
func searchTools(tools []bus.Tool, query string) []bus.Tool {
	q := strings.TrimSpace(query)
	switch {
	case strings.HasPrefix(q, "select:"):
		byName := map[string]bus.Tool{}
		for _, t := range tools {
			byName[t.Name] = t
		}
		var out []bus.Tool
		var seen []string
		for _, n := range strings.Split(strings.TrimPrefix(q, "select:"), ",") {
			n = strings.TrimSpace(n)
			if t, ok := byName[n]; ok && !slices.Contains(seen, n) {
				seen = append(seen, n)
				out = append(out, t)
			}
		}
		return out
	case strings.HasPrefix(q, "+"):
		req, rest, _ := strings.Cut(strings.TrimPrefix(q, "+"), " ")
		req = strings.ToLower(strings.TrimSpace(req))
		rest = strings.TrimSpace(rest)
		var re *regexp.Regexp
		if rest != "" {
			re = compileQuery(rest)
		}
		return ranked(tools, func(t bus.Tool) int {
			if !strings.Contains(strings.ToLower(t.Name), req) {
				return -1
			}
			if re == nil {
				return 0
			}
			return len(re.FindAllStringIndex(t.Name+" "+t.Description, -1))
		})
	default:
		re := compileQuery(q)
		return ranked(tools, func(t bus.Tool) int {
			switch {
			case re.MatchString(t.Name):
				return 2
			case re.MatchString(t.Description):
				return 1
			default:
				return -1
			}
		})
	}
}

// ranked keeps the tools scoring 0 or more, best first (stable), top 5.
func ranked(tools []bus.Tool, score func(bus.Tool) int) []bus.Tool {
	type scored struct {
		t bus.Tool
		s int
	}
	var hits []scored
	for _, t := range tools {
		if s := score(t); s >= 0 {
			hits = append(hits, scored{t, s})
		}
	}
	slices.SortStableFunc(hits, func(a, b scored) int { return b.s - a.s })
	out := make([]bus.Tool, 0, min(len(hits), maxSearchResults))
	for _, h := range hits[:min(len(hits), maxSearchResults)] {
		out = append(out, h.t)
	}
	return out
}

// compileQuery compiles q case-insensitively, or literally when it is not a
// valid regular expression.
func compileQuery(q string) *regexp.Regexp {
	if re, err := regexp.Compile("(?i)" + q); err == nil {
		return re
	}
	return regexp.MustCompile("(?i)" + regexp.QuoteMeta(q))
}
