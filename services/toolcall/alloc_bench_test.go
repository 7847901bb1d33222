package toolcall_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// BenchmarkCallAllocs is one caller's tool calls over mcpbus.tools.call to
// a stdio echo (its process outside this one), with -benchmem: the
// allocations per call of the caller's request, the bus client, toolcall
// and mcpclient together, everything of the call's back half in one
// process (go test -run '^$' -bench BenchmarkCallAllocs -benchmem
// ./services/toolcall).
func BenchmarkCallAllocs(b *testing.B) {
	entry := fmt.Sprintf(`{"command": %q, "env": {"TOOLCALL_FAKE": "stdio"}}`, testBinary(b))
	e := startWith(b, options{cfg: cfgOf(map[string]string{"bench": entry}, ""), catalog: tools("bench", "echo"), quiet: true})
	call := bus.Call{Tool: "bench_echo", Arguments: json.RawMessage(`{"message":"ping"}`)}
	for range 10 {
		if _, err := bus.Request[bus.ToolsCallReply](b.Context(), e.bus.NC, e.bus.Names.ToolsCall(), call); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := bus.Request[bus.ToolsCallReply](b.Context(), e.bus.NC, e.bus.Names.ToolsCall(), call); err != nil {
			b.Fatal(err)
		}
	}
}
