package mcpclient_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// BenchmarkCallToolStdio is one caller calling the demo server's echo over
// stdio in each era (toolcall's path to a stdio upstream). allocs/op and
// B/op are this client's alone (the server is a child process), so they
// compare changes to the client's hot path without the machine's noise.
func BenchmarkCallToolStdio(b *testing.B) {
	for _, era := range []string{demo.EraModern, demo.EraLegacy} {
		b.Run(era, func(b *testing.B) {
			spec := mcpclient.Spec{Server: "bench-" + era, Command: demoBin, Args: []string{"-era", era}, InheritEnv: true, Dir: b.TempDir()}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			c, err := mcpclient.Connect(ctx, spec)
			cancel()
			if err != nil {
				b.Fatalf("Connect: %v", err)
			}
			b.Cleanup(func() { _ = c.Close() })
			args := json.RawMessage(`{"message":"ping"}`)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := c.CallTool(ctx, "echo", args, nil)
				cancel()
				if err != nil || res.IsError || len(res.Content) == 0 {
					b.Fatalf("echo: %+v, %v", res, err)
				}
			}
		})
	}
}
