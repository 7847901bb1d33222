package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// TestServeStdioModern: on one stdio stream a request with a _meta
// version is served without initialize (discover with the caller's hints
// and every version, tools/list with private caching hints, required
// _meta fields and versions checked), subscriptions/listen acknowledges
// and then carries list_changed with its id until notifications/cancelled
// ends it, and a legacy session opened later on the same stream gets its
// own list_changed.
func TestServeStdioModern(t *testing.T) {
	t.Parallel()
	s := startStdio(t)
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	l := s.next(t)
	for _, want := range []string{`"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`, `"instructions":"hints for u1 in t1"`,
		`"resultType":"complete"`, `"cacheScope":"private"`, `"ttlMs":60000`, `"io.modelcontextprotocol/serverInfo":{"name":"mcpbus"`} {
		if !strings.Contains(l, want) {
			t.Errorf("discover: %s lacks %s", l, want)
		}
	}
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+modernMeta+`}}`)
	if l := s.next(t); !strings.Contains(l, `"name":"a"`) || !strings.Contains(l, `"nextCursor"`) || !strings.Contains(l, `"cacheScope":"private"`) {
		t.Errorf("modern tools/list: %s", l)
	}
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`:                                                 `"code":-32602`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`: `"code":-32022`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":{` + modernMeta + `}}`:                                                                                                     `"code":-32601`,
		`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{` + modernMeta + `}}`:                                                                                               `"code":-32601`,
		`{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{` + modernMeta + `}}`:                                                                                     `"code":-32602`,
	} {
		s.send(t, line)
		if l := s.next(t); !strings.Contains(l, want) {
			t.Errorf("%s: got %s, want %s", line, l, want)
		}
	}
	s.send(t, `{"jsonrpc":"2.0","id":"sub","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourcesListChanged":true},`+modernMeta+`}}`)
	if l := s.next(t); l != `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"},"notifications":{"toolsListChanged":true,"resourcesListChanged":true}}}` {
		t.Errorf("acknowledgement: %s", l)
	}
	if err := s.bus.NC.Publish(s.bus.Names.EventsCatalog(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// The lists it asked for (not prompts), in the order tools, resources.
	for _, list := range []string{"tools", "resources"} {
		if l := s.next(t); l != `{"jsonrpc":"2.0","method":"notifications/`+list+`/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub"}}}` {
			t.Errorf("%s list_changed on the subscription: %s", list, l)
		}
	}
	// Cancelling the listen ends it; a legacy session then gets the bare
	// notifications (every list), and only those.
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sub"}}`)
	s.send(t, `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x"}}}`)
	if l := s.next(t); !strings.Contains(l, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", l)
	}
	if err := s.bus.NC.Publish(s.bus.Names.EventsCatalog(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{"tools", "prompts", "resources"} {
		if l := s.next(t); l != `{"jsonrpc":"2.0","method":"notifications/`+list+`/list_changed"}` {
			t.Errorf("after the listen was cancelled: %s, want %s list_changed", l, list)
		}
	}
	s.send(t, `{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if l := s.next(t); l != `{"jsonrpc":"2.0","id":8,"result":{}}` {
		t.Errorf("the next message after list_changed: %s (a second list_changed?)", l)
	}
}

// TestCheckHeaders: the mirrored headers of the HTTP transport against the
// body, Base64 sentinel values decoded, malformed values refused.
func TestCheckHeaders(t *testing.T) {
	t.Parallel()
	m, perr := mcpserver.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"héllo",` + modernMeta + `}}`))
	if perr != nil {
		t.Fatal(perr)
	}
	for _, c := range []struct {
		name, version, method string
		names                 []string
		ok                    bool
	}{
		{"base64 name", "2026-07-28", "tools/call", []string{"=?base64?aMOpbGxv?="}, true},
		{"raw non-ASCII name", "2026-07-28", "tools/call", []string{"héllo"}, false},
		{"control character", "2026-07-28", "tools/call", []string{"h\x01"}, false},
		{"broken base64", "2026-07-28", "tools/call", []string{"=?base64?***?="}, false},
		{"two names", "2026-07-28", "tools/call", []string{"=?base64?aMOpbGxv?=", "=?base64?aMOpbGxv?="}, false},
		{"no name", "2026-07-28", "tools/call", nil, false},
		{"method differs", "2026-07-28", "tools/list", []string{"=?base64?aMOpbGxv?="}, false},
		{"method case differs", "2026-07-28", "Tools/call", []string{"=?base64?aMOpbGxv?="}, false},
		{"version differs", "2025-11-25", "tools/call", []string{"=?base64?aMOpbGxv?="}, false},
	} {
		err := mcpserver.CheckHeaders(m, c.version, c.method, c.names)
		if (err == nil) != c.ok || (err != nil && err.Code != mcpserver.CodeHeaderMismatch) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for _, c := range []struct {
		header string
		era    string
	}{{"", "legacy"}, {"2026-07-28", "modern"}, {"2025-11-25", "legacy"}} {
		list, _ := mcpserver.Parse([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
		if got := mcpserver.IsModern(list, c.header); got != (c.era == "modern") {
			t.Errorf("tools/list without _meta, header %q: modern %v", c.header, got)
		}
	}
	// initialize opens a legacy session unless it comes as a 2026-07-28
	// request, where it is an unknown method.
	for _, c := range []struct {
		params, header string
		modern         bool
	}{
		{`{"protocolVersion":"2025-11-25","capabilities":{}}`, "", false},
		{`{"protocolVersion":"2025-11-25","capabilities":{}}`, "2025-11-25", false},
		{`{"protocolVersion":"2026-07-28","capabilities":{}}`, "", false},
		{`{"protocolVersion":"2026-07-28","capabilities":{}}`, "2026-07-28", true},
		{`{` + modernMeta + `}`, "", true},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`, "", false},
	} {
		init, _ := mcpserver.Parse([]byte(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":` + c.params + `}`))
		if got := mcpserver.IsModern(init, c.header); got != c.modern {
			t.Errorf("initialize %s, header %q: modern %v, want %v", c.params, c.header, got, c.modern)
		}
	}
	e := mcpserver.MissingCapability(map[string]any{"elicitation": map[string]any{}}, "tool demo_ask (server demo) asks the user for input")
	if b, _ := json.Marshal(e); e.Code != -32021 || string(b) != `{"code":-32021,"message":"Missing required client capability: tool demo_ask (server demo) asks the user for input","data":{"requiredCapabilities":{"elicitation":{}}}}` {
		t.Errorf("missing capability: %s", b)
	}
	if caps := mcpserver.ClientCapabilities(m.Params); string(caps) != "{}" {
		t.Errorf("client capabilities %s", caps)
	}
}
