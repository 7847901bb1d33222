package configedit

import (
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

// ChangedServers lists the mcpServers entries of next that are new or
// differ from before (by JSON meaning: key order and spacing do not count),
// in next's order. Removed servers are not listed: nothing of theirs is
// left to validate.
func ChangedServers(before, next []byte) ([]string, error) {
	old, err := config.ServerEntries(before)
	if err != nil {
		old = nil // an unreadable stored file: every server is new
	}
	cur, err := config.ServerEntries(next)
	if err != nil {
		return nil, &EditError{Kind: EditSchema, Message: "Invalid MCP configuration: " + err.Error()}
	}
	var out []string
	for _, name := range cur.Keys() {
		v, _ := cur.Get(name)
		if old != nil {
			if was, ok := old.Get(name); ok && sameValue(was, v) {
				continue
			}
		}
		out = append(out, name)
	}
	return out, nil
}

// sameValue compares two decoded orderedjson values by JSON meaning.
func sameValue(a, b any) bool {
	ja, errA := orderedjson.Encode(a, false)
	jb, errB := orderedjson.Encode(b, false)
	return errA == nil && errB == nil && config.SameJSON(json.RawMessage(ja), json.RawMessage(jb))
}
