package mcpclient

import (
	"encoding/json"
	"strings"
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

// Two stdio servers that differ only in their environment are two origins
// for the era cache (one may be a modern build selected by an env flag),
// equal environments are one, and no env value is kept in the key.
func TestStdioOriginIncludesTheEnvironment(t *testing.T) {
	spec := func(env map[string]string) *Spec {
		return &Spec{Transport: TransportStdio, Command: "srv", Args: []string{"-x"}, Dir: "/w", Env: env}
	}
	a, b := spec(map[string]string{"MODE": "legacy", "TOKEN": "s3cret-value"}), spec(map[string]string{"MODE": "modern", "TOKEN": "s3cret-value"})
	if a.origin() == b.origin() {
		t.Errorf("origins equal for different environments: %q", a.origin())
	}
	if again := spec(map[string]string{"TOKEN": "s3cret-value", "MODE": "legacy"}); again.origin() != a.origin() {
		t.Errorf("equal environments give two origins: %q, %q", again.origin(), a.origin())
	}
	if strings.Contains(a.origin(), "s3cret-value") || strings.Contains(a.origin(), "legacy") {
		t.Errorf("the origin keeps an env value: %q", a.origin())
	}
	if spec(nil).origin() == a.origin() {
		t.Errorf("no environment and some environment are one origin")
	}
}
