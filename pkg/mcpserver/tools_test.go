package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// TestUnknownToolIsInvalidParams: in both eras a call of a tool the bus
// does not know (not_found) is JSON-RPC -32602 naming the tool, the reason
// and what to do, while mcpbus's other refusals (here a guardrail) stay
// results with isError.
func TestUnknownToolIsInvalidParams(t *testing.T) {
	t.Parallel()
	s := startStdio(t)
	peer := s.bus.Connect(t)
	if _, err := peer.Subscribe(s.bus.Names.ToolsCall(), func(m *nats.Msg) {
		var req bus.Call
		_ = json.Unmarshal(m.Data, &req)
		e := bus.Errorf(bus.CodeNotFound, "tool '%s' is not in the catalog", req.Tool)
		if req.Tool == "a" {
			e = bus.Errorf(bus.CodeGuardrailDenied, "tool 'a' is denied by the guardrail")
		}
		body, _ := json.Marshal(bus.ErrorReply{Error: e})
		r := nats.NewMsg(m.Reply)
		r.Data = body
		r.Header.Set(bus.HeaderError, string(e.Code))
		_ = m.RespondMsg(r)
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x"}}}`)
	if l := s.next(t); !strings.Contains(l, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", l)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for era, params := range map[string]string{"legacy": `"name":"nope"`, "modern": `"name":"nope",` + modernMeta} {
		s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+params+`}}`)
		l := s.next(t)
		for _, want := range []string{`"code":-32602`, `Unknown tool: nope (tool 'nope' is not in the catalog). Call tools/list`, `"mcpbus_code":"not_found"`} {
			if !strings.Contains(l, want) {
				t.Errorf("%s unknown tool: %s lacks %s", era, l, want)
			}
		}
	}
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a"}}`)
	if l := s.next(t); !strings.Contains(l, `"isError":true`) || !strings.Contains(l, "guardrail") || strings.Contains(l, `"error"`) {
		t.Errorf("guardrail refusal: %s", l)
	}
}
