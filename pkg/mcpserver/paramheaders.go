package mcpserver

import (
	"context"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Custom headers from tool parameters (streamable HTTP, "Custom Headers
// from Tool Parameters"): a tool's inputSchema may mark properties with
// x-mcp-header; a 2026-07-28 client mirrors their values into
// Mcp-Param-{name} headers, and a server that reads the body must check
// them against the arguments.

// paramAnnotations maps the lower-cased x-mcp-header names of schema to
// the property paths they annotate.
func paramAnnotations(schema json.RawMessage) map[string][]string {
	out := map[string][]string{}
	var walk func(raw json.RawMessage, path []string)
	walk = func(raw json.RawMessage, path []string) {
		var node struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Header     string                     `json:"x-mcp-header"`
		}
		if json.Unmarshal(raw, &node) != nil {
			return
		}
		if node.Header != "" && len(path) > 0 {
			out[strings.ToLower(node.Header)] = path
		}
		for name, prop := range node.Properties {
			walk(prop, append(append([]string(nil), path...), name))
		}
	}
	walk(schema, nil)
	return out
}

// argumentAt is the argument at path (nil when absent or null).
func argumentAt(args json.RawMessage, path []string) json.RawMessage {
	cur := args
	for _, key := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil
		}
		if cur = obj[key]; cur == nil {
			return nil
		}
	}
	if string(cur) == "null" {
		return nil
	}
	return cur
}

// headerMatches reports whether header (decoded) is the JSON value v as
// the client mirrors it: a string as is, a number numerically, a boolean
// as true or false.
func headerMatches(header string, v json.RawMessage) bool {
	switch v[0] {
	case '"':
		var s string
		return json.Unmarshal(v, &s) == nil && s == header
	case 't', 'f':
		return string(v) == header
	default:
		a, okA := new(big.Float).SetString(header)
		b, okB := new(big.Float).SetString(string(v))
		return okA && okB && a.Cmp(b) == 0
	}
}

// CheckParamHeaders checks a tools/call's Mcp-Param-* headers (params:
// lower-cased name after the prefix → values) against the tool's
// x-mcp-header annotations in the caller's catalog: an annotated argument
// present needs its header with a matching value, a header needs its
// argument; a malformed value is refused. Headers no annotation names are
// ignored (forwarded, as the spec asks of intermediaries). A call without
// any Mcp-Param-* header reads the catalog only for a tool this replica
// does not know to be free of annotations (headerTools), so the hot path
// of a tool without them costs nothing.
func (m *Modern) CheckParamHeaders(ctx context.Context, x *Exchange, msg *Message, params map[string][]string) *Error {
	if msg.Method != "tools/call" {
		return nil
	}
	for name, values := range params {
		if len(values) != 1 {
			return Errorf(CodeHeaderMismatch, "Header mismatch: one Mcp-Param-%s header, not %d", name, len(values))
		}
		if _, ok := HeaderValue(values[0]); !ok {
			return Errorf(CodeHeaderMismatch, "Header mismatch: the Mcp-Param-%s header value is malformed", name)
		}
	}
	p, err := msg.paramsOf()
	if err != nil {
		return nil // tools/call answers the params error
	}
	if len(params) == 0 && m.s.headerTools.free(p.Name) {
		return nil
	}
	gen := m.s.headerTools.generation()
	cat, err := m.s.catalog(ctx, x)
	if err != nil {
		return m.s.busError(err, "tools/call")
	}
	m.s.headerTools.learn(gen, cat.Tools)
	var schema json.RawMessage
	for _, t := range cat.Tools {
		if t.Name == p.Name {
			schema = t.InputSchema
		}
	}
	for name, path := range paramAnnotations(schema) {
		arg := argumentAt(orEmpty(p.Arguments), path)
		values, sent := params[name]
		switch {
		case arg == nil && sent:
			return Errorf(CodeHeaderMismatch, "Header mismatch: Mcp-Param-%s is sent but argument %s is not", name, strconv.Quote(strings.Join(path, ".")))
		case arg != nil && !sent:
			return Errorf(CodeHeaderMismatch, "Header mismatch: argument %s is sent without its Mcp-Param-%s header", strconv.Quote(strings.Join(path, ".")), name)
		case arg != nil:
			v, _ := HeaderValue(values[0])
			if !headerMatches(v, arg) {
				return Errorf(CodeHeaderMismatch, "Header mismatch: Mcp-Param-%s header value does not match argument %s", name, strconv.Quote(strings.Join(path, ".")))
			}
		}
	}
	return nil
}

// maxHeaderTools bounds headerTools: past it the map starts over.
const maxHeaderTools = 1 << 14

// headerTools remembers, per tool name, whether a catalog this replica
// read gives the tool x-mcp-header annotations, so a 2026-07-28 call
// without Mcp-Param-* headers of a tool known to have none is not checked
// against the catalog. The names are the catalogs' (never a caller's
// guess); CatalogChanged forgets them all, and a catalog read that
// overlapped a change is not learnt (generation).
type headerTools struct {
	mu        sync.Mutex
	gen       uint64
	annotated map[string]bool
}

// free reports whether name is known to have no annotations.
func (h *headerTools) free(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	annotated, known := h.annotated[name]
	return known && !annotated
}

func (h *headerTools) generation() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen
}

// learn records the tools of a catalog read in generation gen.
func (h *headerTools) learn(gen uint64, tools []bus.Tool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen {
		return
	}
	if h.annotated == nil || len(h.annotated)+len(tools) > maxHeaderTools {
		h.annotated = make(map[string]bool, len(tools))
	}
	for _, t := range tools {
		h.annotated[t.Name] = len(paramAnnotations(t.InputSchema)) > 0
	}
}

// forget drops everything learnt.
func (h *headerTools) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	h.annotated = nil
}

// CatalogChanged tells the server a catalog may have changed (a catalog
// event, a personal connection change), so what it learnt of the tools'
// x-mcp-header annotations is read again.
func (s *Server) CatalogChanged() { s.headerTools.forget() }
