package bus

import (
	"bytes"
	"encoding/json"
)

// Rewriting what upstreams answer (raw → visible URIs): every
// resource_link block's uri and every embedded resource's resource.uri in
// tool results and prompt messages, contents[].uri of a read, and a
// tool's _meta.ui.resourceUri (docs/federation.md, "Where URIs are
// rewritten"). Other fields keep the upstream's bytes (a blob is never
// decoded); only the objects holding a rewritten URI are encoded again.

// RewriteBlocks rewrites the resource URIs of content blocks of server in
// place and returns blocks.
func RewriteBlocks(server string, blocks []json.RawMessage) []json.RawMessage {
	for i, b := range blocks {
		blocks[i] = RewriteBlock(server, b)
	}
	return blocks
}

// RewriteBlock is one content block with its resource URI visible: a
// resource_link's uri, an embedded resource's resource.uri; any other
// block unchanged.
func RewriteBlock(server string, block json.RawMessage) json.RawMessage {
	if !bytes.Contains(block, []byte(`"resource`)) {
		return block // the hot path: text, image, audio
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(block, &m) != nil {
		return block
	}
	var typ string
	_ = json.Unmarshal(m["type"], &typ)
	switch typ {
	case "resource_link":
		if !rewriteField(m, "uri", server) {
			return block
		}
	case "resource":
		inner, ok := m["resource"]
		if !ok {
			return block
		}
		r := RewriteContents(server, inner)
		if bytes.Equal(r, inner) {
			return block
		}
		m["resource"] = r
	default:
		return block
	}
	out, err := json.Marshal(m)
	if err != nil {
		return block
	}
	return out
}

// RewriteContents is one resource contents object (a read's contents[]
// item, an embedded resource) with its uri visible.
// Only the uri is decoded and encoded: the rest (a text, a blob) keeps
// the upstream's bytes, unscanned but for finding the member (Member).
func RewriteContents(server string, contents json.RawMessage) json.RawMessage {
	s, e, _, _, ok := Member(contents, "uri")
	if !ok {
		return contents
	}
	var uri string
	if json.Unmarshal(contents[s:e], &uri) != nil || uri == "" {
		return contents
	}
	b, err := json.Marshal(VisibleURI(server, uri))
	if err != nil {
		return contents
	}
	out := make([]byte, 0, len(contents)-(e-s)+len(b))
	return append(append(append(out, contents[:s]...), b...), contents[e:]...)
}

// RewriteMessages rewrites prompt messages ({role, content}) of server in
// place and returns them.
func RewriteMessages(server string, messages []json.RawMessage) []json.RawMessage {
	for i, msg := range messages {
		if !bytes.Contains(msg, []byte(`"resource`)) {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(msg, &m) != nil {
			continue
		}
		c, ok := m["content"]
		if !ok {
			continue
		}
		nc := RewriteBlock(server, c)
		if bytes.Equal(nc, c) {
			continue
		}
		m["content"] = nc
		if out, err := json.Marshal(m); err == nil {
			messages[i] = out
		}
	}
	return messages
}

// RewriteToolMeta is a tool's _meta with ui.resourceUri (and the older
// flat "ui/resourceUri") visible; anything else unchanged.
func RewriteToolMeta(server string, meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 || !bytes.Contains(meta, []byte("resourceUri")) {
		return meta
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return meta
	}
	changed := rewriteField(m, "ui/resourceUri", server)
	if ui, ok := m["ui"]; ok {
		var u map[string]json.RawMessage
		if json.Unmarshal(ui, &u) == nil && rewriteField(u, "resourceUri", server) {
			if b, err := json.Marshal(u); err == nil {
				m["ui"], changed = b, true
			}
		}
	}
	if !changed {
		return meta
	}
	out, err := json.Marshal(m)
	if err != nil {
		return meta
	}
	return out
}

// rewriteField makes m[key], a string URI, visible; false when absent or
// not a string.
func rewriteField(m map[string]json.RawMessage, key, server string) bool {
	var uri string
	if json.Unmarshal(m[key], &uri) != nil || uri == "" {
		return false
	}
	b, err := json.Marshal(VisibleURI(server, uri))
	if err != nil {
		return false
	}
	m[key] = b
	return true
}
