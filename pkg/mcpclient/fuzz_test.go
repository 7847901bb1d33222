package mcpclient

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
)

// FuzzUpstreamReply feeds arbitrary bytes through what the client does with
// one JSON-RPC reply line of an upstream: the transport's decoding into a
// response, the JSON-RPC error's conversion, the tools/call result split
// (parseCallResult) and the tools/list split (parseTool). Nothing panics;
// an accepted call result holds JSON objects as content blocks and valid,
// non-null JSON as structuredContent and _meta; an accepted tool has a name
// and keeps its definition's bytes.
func FuzzUpstreamReply(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":"mcpbus-1","result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"a":1},"isError":false,"_meta":{"t":1}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":null}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":["x", 1, null]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"hologram"}],"structuredContent":null,"isError":"yes"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad params","data":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"url elicitation"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":""},{},7],"nextCursor":"c"}}`,
		`{"jsonrpc":"2.0","id":{"x":1},"result":{}}`,
		`{"jsonrpc":"2.0","id":`,
		`[1,2,3]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var resp transport.JSONRPCResponse
		if json.Unmarshal(line, &resp) != nil {
			return
		}
		if resp.Error != nil {
			if err := resp.Error.AsError(); err == nil {
				t.Fatalf("JSON-RPC error %+v converts to no error", resp.Error)
			}
			return
		}
		if res, err := parseCallResult(resp.Result); err == nil {
			for i, b := range res.Content {
				var obj map[string]json.RawMessage
				if json.Unmarshal(b, &obj) != nil {
					t.Fatalf("content block %d %q is not a JSON object", i, b)
				}
			}
			for name, v := range map[string]json.RawMessage{"structuredContent": res.StructuredContent, "_meta": res.Meta} {
				if v != nil && (!json.Valid(v) || string(v) == "null") {
					t.Fatalf("%s %q is not a JSON value", name, v)
				}
			}
		}
		var list struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if json.Unmarshal(resp.Result, &list) != nil {
			return
		}
		for _, raw := range list.Tools {
			tool, err := parseTool(raw)
			if err != nil {
				continue
			}
			if tool.Name == "" || !bytes.Equal(tool.Raw, raw) {
				t.Fatalf("tool %+v from %q", tool, raw)
			}
		}
	})
}
