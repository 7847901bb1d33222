package mcpserver_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
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
