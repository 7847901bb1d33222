package pinning

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Flag kinds: what a change adds that an approver should look at.
const (
	// FlagInstructions: new directions to the agent ("you must", "always",
	// "before calling", <IMPORTANT> blocks…).
	FlagInstructions = "instructions"
	// FlagOutboundURL: a URL that was not there before.
	FlagOutboundURL = "outbound_url"
	// FlagEmail: an e-mail address that was not there before.
	FlagEmail = "email_address"
	// FlagConcealment: a phrase asking the agent to hide something or to
	// drop its instructions ("do not tell the user", "ignore previous").
	FlagConcealment = "concealment"
	// FlagCrossTool: the text now names another tool of the server, or
	// tells the agent to call a tool.
	FlagCrossTool = "cross_tool_reference"
	// FlagHintFlip: destructiveHint or readOnlyHint changed value.
	FlagHintFlip = "hint_flip"
)

// Flag is one finding, with the text that raised it.
type Flag struct {
	Kind     string `json:"kind"`
	Evidence string `json:"evidence"`
}

// Change is one field that differs: its old and new value (JSON).
type Change struct {
	Field string          `json:"field"`
	Old   json.RawMessage `json:"old,omitempty"`
	New   json.RawMessage `json:"new,omitempty"`
}

// Diff is what the approver sees: the fields that changed, the flags, and
// whether the change is purely descriptive (only the description changed
// and nothing was flagged).
type Diff struct {
	// New is set for a tool with no approved definition.
	New         bool     `json:"new,omitempty"`
	Changes     []Change `json:"changes"`
	Flags       []Flag   `json:"flags"`
	Descriptive bool     `json:"descriptive"`
}

// Compare diffs next against the approved definition old (nil for a new
// tool). others are the server's other tool names, for cross-tool
// references.
func Compare(old *Definition, next Definition, others []string) Diff {
	d := Diff{Changes: []Change{}, Flags: []Flag{}}
	var prev Definition
	if old == nil {
		d.New = true
	} else {
		prev = *old
	}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	if prev.Description != next.Description {
		d.Changes = append(d.Changes, Change{Field: "description", Old: rawOrNil(prev.Description != "" || old != nil, str(prev.Description)), New: str(next.Description)})
	}
	for _, f := range []struct {
		name      string
		old, next json.RawMessage
	}{{"input_schema", prev.InputSchema, next.InputSchema}, {"output_schema", prev.OutputSchema, next.OutputSchema}, {"annotations", prev.Annotations, next.Annotations}} {
		o, _ := canonicalJSON(f.old)
		n, _ := canonicalJSON(f.next)
		if !bytes.Equal(o, n) {
			d.Changes = append(d.Changes, Change{Field: f.name, Old: o, New: n})
		}
	}
	oldText, newText := normalise(texts(prev)), normalise(texts(next))
	for _, r := range rules {
		for _, ev := range added(r.re, oldText, newText) {
			d.Flags = append(d.Flags, Flag{Kind: r.kind, Evidence: ev})
		}
	}
	for _, name := range others {
		if name == next.Name || len(name) < 4 {
			continue
		}
		re := regexp.MustCompile(`(?i)(^|[^a-z0-9_-])` + regexp.QuoteMeta(strings.ToLower(name)) + `($|[^a-z0-9_-])`)
		if len(re.FindAllString(newText, -1)) > len(re.FindAllString(oldText, -1)) {
			d.Flags = append(d.Flags, Flag{Kind: FlagCrossTool, Evidence: name})
		}
	}
	if old != nil {
		for _, h := range []struct {
			name string
			def  bool
		}{{"destructiveHint", true}, {"readOnlyHint", false}} {
			was, now := hint(prev.Annotations, h.name, h.def), hint(next.Annotations, h.name, h.def)
			if was != now {
				ev := h.name + ": false → true"
				if was {
					ev = h.name + ": true → false"
				}
				d.Flags = append(d.Flags, Flag{Kind: FlagHintFlip, Evidence: ev})
			}
		}
	}
	d.Descriptive = old != nil && len(d.Flags) == 0 && len(d.Changes) > 0 &&
		!slices.ContainsFunc(d.Changes, func(c Change) bool { return c.Field != "description" })
	return d
}

func rawOrNil(keep bool, b json.RawMessage) json.RawMessage {
	if !keep {
		return nil
	}
	return b
}

// HasFlag reports whether d has a flag of kind.
func (d Diff) HasFlag(kind string) bool {
	return slices.ContainsFunc(d.Flags, func(f Flag) bool { return f.Kind == kind })
}

// rule is one flag's pattern over normalised text.
type rule struct {
	kind string
	re   *regexp.Regexp
}

var rules = []rule{
	{FlagConcealment, regexp.MustCompile(`\b(do not|don't|dont|never|must not|should not)\s+(tell|inform|mention|reveal|show|notify|alert|let)\b[^.!?\n]{0,40}?\b(user|human|anyone|operator|them)\b`)},
	{FlagConcealment, regexp.MustCompile(`\b(do not|don't|dont|never)\s+(mention|reveal|disclose)\b`)},
	{FlagConcealment, regexp.MustCompile(`\b(ignore|disregard|forget|override)\s+(all\s+|any\s+)?(the\s+|your\s+)?(previous|prior|above|earlier|other|system)\b`)},
	{FlagConcealment, regexp.MustCompile(`\bwithout\s+(telling|informing|notifying|asking)\b`)},
	{FlagConcealment, regexp.MustCompile(`\b(secretly|silently|covertly|quietly)\b`)},
	{FlagConcealment, regexp.MustCompile(`\b(keep|hide)\s+(this|it|these)\b[^.!?\n]{0,30}?\b(secret|from)\b`)},
	{FlagInstructions, regexp.MustCompile(`<\s*/?\s*(important|instructions?|system|note)\s*>`)},
	{FlagInstructions, regexp.MustCompile(`\b(you must|you should|you need to|you have to|make sure|be sure to|remember to|it is important|important:|always|before (using|calling|running|invoking|answering)|after (using|calling|running)|instead of|first (call|use|run|read|send)|must (call|use|first|always|include|pass|send|read))\b`)},
	{FlagOutboundURL, regexp.MustCompile(`\b(https?|ftp|wss?)://[^\s"'<>)\]]+`)},
	{FlagEmail, regexp.MustCompile(`\b[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}\b`)},
	{FlagCrossTool, regexp.MustCompile(`\b(call|use|invoke|run|trigger)\s+(the\s+)?[a-z0-9_.-]+\s+tool\b`)},
}

// added returns the matches of re in next beyond those already in prev
// (counted per distinct text).
func added(re *regexp.Regexp, prev, next string) []string {
	seen := map[string]int{}
	for _, m := range re.FindAllString(prev, -1) {
		seen[m]++
	}
	var out []string
	for _, m := range re.FindAllString(next, -1) {
		if seen[m] > 0 {
			seen[m]--
			continue
		}
		out = append(out, m)
	}
	return out
}

// texts is every text an agent reads in d: the description, and every
// "description" and "title" string in its schemas and annotations.
func texts(d Definition) string {
	parts := []string{d.Description}
	for _, raw := range []json.RawMessage{d.InputSchema, d.OutputSchema, d.Annotations} {
		if v, ok := canonicalValue(raw); ok {
			collect(v, &parts)
		}
	}
	return strings.Join(parts, "\n")
}

func collect(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "description" || k == "title") {
				*out = append(*out, s)
				continue
			}
			collect(e, out)
		}
	case []any:
		for _, e := range x {
			collect(e, out)
		}
	}
}

var spaces = regexp.MustCompile(`[ \t\r\f\v]+`)

// normalise lower-cases text, folds typographic apostrophes and collapses
// white space, so a phrase matches however it is typed.
func normalise(s string) string {
	s = strings.ToLower(strings.NewReplacer("’", "'", "‘", "'", "`", "'").Replace(s))
	return spaces.ReplaceAllString(s, " ")
}

// canonicalJSON is raw re-encoded canonically (nil when absent).
func canonicalJSON(raw json.RawMessage) (json.RawMessage, bool) {
	v, ok := canonicalValue(raw)
	if !ok {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimRight(buf.Bytes(), "\n"), true
}

// hint reads a boolean annotation, def when absent (the MCP defaults:
// destructiveHint true, readOnlyHint false).
func hint(annotations json.RawMessage, name string, def bool) bool {
	var m map[string]any
	if json.Unmarshal(annotations, &m) != nil {
		return def
	}
	if b, ok := m[name].(bool); ok {
		return b
	}
	return def
}
