package mcpserver_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A tools/call that no toolcall replica answers (here the only one
// swallows the request: it was cut off, or died with it) ends at the
// tool's own timeout from the catalog plus a margin, as a clean tool
// error naming the tool and its timeout, not at the 120 s bound on every
// bus request (RequestTimeout, left at its default here).
func TestCallNobodyAnswersEndsAtTheToolsTimeout(t *testing.T) {
	t.Parallel()
	s := startStdioCatalog(t, func(bus.ToolsListRequest) bus.ToolsListReply {
		return bus.ToolsListReply{Tools: []bus.Tool{{Name: "slow", TimeoutMS: 300}}, Bind: []string{"slow"}}
	}, nil)
	var swallowed atomic.Int32
	peer := s.bus.Connect(t)
	if _, err := peer.Subscribe(s.bus.Names.ToolsCall(), func(m *nats.Msg) {
		var req bus.ToolsCallRequest
		_ = json.Unmarshal(m.Data, &req)
		if req.Tool == "slow" {
			swallowed.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x"}}}`)
	s.next(t)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if l := s.next(t); !strings.Contains(l, `"name":"slow"`) {
		t.Fatalf("tools/list: %s", l)
	}
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	// next waits 20 s at most: far less than RequestTimeout.
	l := s.next(t)
	var res struct {
		ID     int `json:"id"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(l), &res); err != nil || res.ID != 3 || !res.Result.IsError || len(res.Result.Content) != 1 {
		t.Fatalf("tools/call nobody answers: %s (%v), want an isError result", l, err)
	}
	text := res.Result.Content[0].Text
	for _, want := range []string{"tool 'slow'", "timeout (300 ms)", "upstream_timeout"} {
		if !strings.Contains(text, want) {
			t.Errorf("error text %q lacks %q", text, want)
		}
	}
	if swallowed.Load() != 1 {
		t.Errorf("toolcall received %d requests, want 1", swallowed.Load())
	}
}

// A tool's timeout never extends the wait past the bound on every bus
// request: a catalog entry with a long timeout (a personal connection's
// own tool_call_timeout, set by its user) ends at RequestTimeout, as a
// call without one does.
func TestToolTimeoutDoesNotExtendTheRequestBound(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	peer := b.Connect(t)
	if _, err := peer.Subscribe(b.Names.ToolsList(), func(m *nats.Msg) {
		body, _ := json.Marshal(bus.ToolsListReply{Tools: []bus.Tool{{Name: "mine", Personal: true, TimeoutMS: 3_600_000}}, Bind: []string{"mine"}})
		_ = m.Respond(body)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Subscribe(b.Names.ToolsCall(), func(*nats.Msg) {}); err != nil { // never answers
		t.Fatal(err)
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{RequestTimeout: 500 * time.Millisecond}, mcpserver.Deps{NC: b.Connect(t), Names: b.Names})
	if err != nil {
		t.Fatal(err)
	}
	s := serveStdio(t, srv, b, mcpserver.Exchange{UserID: "u1", ThreadHeader: "t1"})
	s.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x"}}}`)
	s.next(t)
	s.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if l := s.next(t); !strings.Contains(l, `"name":"mine"`) {
		t.Fatalf("tools/list: %s", l)
	}
	s.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mine","arguments":{}}}`)
	// next waits 20 s at most: far less than the tool's hour.
	if l := s.next(t); !strings.Contains(l, `"id":3`) || !strings.Contains(l, "upstream_timeout") || strings.Contains(l, "3600000") {
		t.Fatalf("tools/call of a tool with an hour's timeout under a 500 ms bound: %s", l)
	}
}
