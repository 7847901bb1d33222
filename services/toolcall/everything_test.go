package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func everythingTools() []bus.Tool {
	return tools("ev", "echo", "get-sum", "get-structured-content", "get-tiny-image", "get-resource-links", "trigger-long-running-operation")
}

func TestServerEverything(t *testing.T) {
	t.Parallel()
	entry := testkit.Everything(t)
	for _, transport := range []string{"stdio", "sse", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			var server string
			switch transport {
			case "stdio":
				server = fmt.Sprintf(`{"command": "node", "args": [%q, "stdio"], "tool_call_timeout": 1}`, entry)
			case "sse":
				server = fmt.Sprintf(`{"type": "sse", "url": %q, "tool_call_timeout": 0.2}`, testkit.ServeEverything(t, "sse")+"/sse")
			case "http":
				server = fmt.Sprintf(`{"type": "http", "url": %q, "tool_call_timeout": 0.2}`, testkit.ServeEverything(t, "streamableHttp")+"/mcp")
			}
			e := start(t, cfgOf(map[string]string{"ev": server}, ""), everythingTools())
			call := func(tool, args string) bus.ToolsCallReply {
				t.Helper()
				return e.mustCall(t, bus.Call{Tool: "ev_" + tool, Arguments: json.RawMessage(args)})
			}
			if got := text(t, call("echo", `{"message":"hello"}`)); got != "Echo: hello" {
				t.Errorf("echo = %q", got)
			}
			if got := text(t, call("get-sum", `{"a":2,"b":40}`)); !strings.Contains(got, "42") {
				t.Errorf("get-sum = %q", got)
			}
			r := call("get-structured-content", `{"location":"Chicago"}`)
			var weather struct {
				Temperature float64
				Conditions  string
			}
			if err := json.Unmarshal(r.StructuredContent, &weather); err != nil || weather.Temperature != 36 || weather.Conditions == "" || r.IsError {
				t.Errorf("get-structured-content = %s (%v)", r.StructuredContent, err)
			}
			r = call("get-tiny-image", `{}`)
			kinds := blockKinds(t, r)
			if !strings.Contains(kinds, "image") || !strings.Contains(kinds, "text") {
				t.Errorf("get-tiny-image blocks = %s", kinds)
			}
			r = call("get-resource-links", `{"count":3}`)
			if n := strings.Count(blockKinds(t, r), "resource_link"); n != 3 {
				t.Errorf("get-resource-links blocks = %s", blockKinds(t, r))
			}

			// A long operation that outlasts tool_call_timeout.
			if transport == "stdio" {
				_, err := e.call(t, bus.Call{Tool: "ev_trigger-long-running-operation", Arguments: json.RawMessage(`{"duration":5,"steps":5}`)})
				var be *bus.Error
				if !errors.As(err, &be) || be.Code != bus.CodeUpstreamTimeout || !strings.Contains(be.Message, "'ev'") || !strings.Contains(be.Message, "tool_call_timeout") {
					t.Fatalf("long operation: err = %v, want upstream_timeout", err)
				}
				// The session was closed; the next call starts clean.
				if got := text(t, call("echo", `{"message":"again"}`)); got != "Echo: again" {
					t.Errorf("echo after timeout = %q", got)
				}
				return
			}
			// HTTP and SSE: the seed bounds only stdio calls by
			// tool_call_timeout, so the operation completes...
			r = call("trigger-long-running-operation", `{"duration":0.6,"steps":2}`)
			if got := text(t, r); !strings.Contains(got, "Long running operation completed") {
				t.Errorf("long operation = %q", got)
			}
			// ...and the caller's deadline is what bounds it.
			_, err := e.call(t, bus.Call{Tool: "ev_trigger-long-running-operation", Arguments: json.RawMessage(`{"duration":10,"steps":5}`), TimeoutMS: 400})
			var be *bus.Error
			if !errors.As(err, &be) || be.Code != bus.CodeUpstreamTimeout || !strings.Contains(be.Message, "'ev'") {
				t.Fatalf("long operation with timeout_ms: err = %v, want upstream_timeout", err)
			}
			if got := text(t, call("echo", `{"message":"again"}`)); got != "Echo: again" {
				t.Errorf("echo after timeout = %q", got)
			}
		})
	}
}

func blockKinds(t *testing.T, r bus.ToolsCallReply) string {
	t.Helper()
	var kinds []string
	for _, c := range r.Content {
		var b struct{ Type string }
		if err := json.Unmarshal(c, &b); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, b.Type)
	}
	return strings.Join(kinds, ",")
}
