package mcpclient

import (
	"encoding/json"
	"testing"
)

// withoutServerInfo drops the serverInfo a 2026-07-28 result carries in its
// _meta and keeps every other key; a _meta of nothing but the serverInfo
// (onlyServerInfo, no map decode) becomes nil.
func TestWithoutServerInfo(t *testing.T) {
	info := `"io.modelcontextprotocol/serverInfo":{"name":"demo","version":"1"}`
	for meta, want := range map[string]string{
		`{` + info + `}`:                             ``,
		`{` + info + `,"x":1}`:                       `{"x":1}`,
		`{"x":{"y":[1,2]},` + info + `}`:             `{"x":{"y":[1,2]}}`,
		`{ ` + info + ` }`:                           ``,
		`{"a":"io.modelcontextprotocol/serverInfo"}`: `{"a":"io.modelcontextprotocol/serverInfo"}`,
		`{"x":1}`: `{"x":1}`,
	} {
		if got := withoutServerInfo(json.RawMessage(meta)); string(got) != want {
			t.Errorf("withoutServerInfo(%s) = %s, want %s", meta, got, want)
		}
	}
	if !onlyServerInfo(json.RawMessage(`{` + info + `}`)) {
		t.Error("onlyServerInfo is false for a compact _meta of the serverInfo alone: every modern result takes the map path")
	}
	if onlyServerInfo(json.RawMessage(`{` + info + `,"x":1}`)) {
		t.Error("onlyServerInfo is true for a _meta with another key")
	}
}
