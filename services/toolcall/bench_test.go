package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcptransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// BenchmarkToolCall compares a trivial tool (the fake's echo) called
// through mcpbus.tools.call (embedded NATS, the toolcall service, a catalog
// responder) with the same Go server called directly with mcp-go's own
// client (client.CallTool: what an agent would run without mcpbus; over
// HTTP on a transport keeping as many idle connections per host as the
// gateway's, so neither side pays for reconnecting), over stdio and
// streamable HTTP, with 1 and 32 concurrent callers.
// Both paths run b.N calls in the same run; the metrics are each path's
// p50 and p99 latency and calls per second, the latency the gateway adds
// at p50, the ratios gateway/direct, and for scale the p50 of a bare NATS
// request/reply on the same bus (bus-floor).
func BenchmarkToolCall(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		for _, callers := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s/callers=%d", transport, callers), func(b *testing.B) {
				benchCompare(b, transport, callers)
			})
		}
	}
}

func benchCompare(b *testing.B, transport string, callers int) {
	var (
		entry  string
		direct *client.Client
		err    error
	)
	switch transport {
	case "stdio":
		// The same server both ways: the fake without request recording.
		entry = fmt.Sprintf(`{"command": %q, "env": {"TOOLCALL_FAKE": "stdio"}}`, testBinary(b))
		direct, err = client.NewStdioMCPClient(testBinary(b), []string{"TOOLCALL_FAKE=stdio"})
	case "http":
		f := newHTTPFake(b, false)
		entry = httpServerJSON(f.URL, "")
		direct, err = client.NewStreamableHttpClient(f.URL, mcptransport.WithHTTPBasicClient(mcpclient.SharedHTTPClient()))
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Close() })
	e := startWith(b, options{cfg: cfgOf(map[string]string{"bench": entry}, ""), catalog: tools("bench", "echo"), quiet: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = direct.Start(ctx)
	if err == nil {
		_, err = direct.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ProtocolVersion: mcpclient.ProtocolVersion,
			ClientInfo:      mcp.Implementation{Name: "bench-direct", Version: "1"},
		}})
	}
	cancel()
	if err != nil {
		b.Fatal(err)
	}

	args := json.RawMessage(`{"message":"ping"}`)
	directCall := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var r mcp.CallToolRequest
		r.Params.Name, r.Params.Arguments = "echo", args
		_, err := direct.CallTool(ctx, r)
		return err
	}
	req := bus.ToolsCallRequest{Tool: "bench_echo", Arguments: args, UserID: "bench", ThreadID: "t"}
	gatewayCall := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, bus.SubjectToolsCall, req)
		return err
	}
	// The bus alone: a request/reply of the same body to a responder that
	// answers at once, for scale (what any NATS hop costs on this machine).
	floorNC := e.bus.Connect(b)
	reqBody, _ := json.Marshal(req)
	if _, err := floorNC.Subscribe("bench.floor", func(m *nats.Msg) { go func() { _ = m.Respond(m.Data) }() }); err != nil {
		b.Fatal(err)
	}
	_ = floorNC.Flush()
	floorCall := func() error {
		_, err := e.bus.NC.Request("bench.floor", reqBody, 10*time.Second)
		return err
	}
	// Warm up both paths (the gateway's first call opens its session).
	for range 20 {
		if err := directCall(); err != nil {
			b.Fatal(err)
		}
		if err := gatewayCall(); err != nil {
			b.Fatal(err)
		}
	}

	b.ResetTimer()
	d := measure(b, b.N, callers, directCall)
	g := measure(b, b.N, callers, gatewayCall)
	b.StopTimer()
	fl := measure(b, min(b.N, 2000), callers, floorCall)

	b.ReportMetric(us(d.p50), "direct-p50-µs")
	b.ReportMetric(us(d.p99), "direct-p99-µs")
	b.ReportMetric(d.rate, "direct-calls/s")
	b.ReportMetric(us(g.p50), "gw-p50-µs")
	b.ReportMetric(us(g.p99), "gw-p99-µs")
	b.ReportMetric(g.rate, "gw-calls/s")
	b.ReportMetric(us(g.p50-d.p50), "added-p50-µs")
	b.ReportMetric(us(fl.p50), "bus-floor-p50-µs")
	b.ReportMetric(float64(g.p50)/float64(d.p50), "gw/direct-p50")
	b.ReportMetric(g.rate/d.rate, "gw/direct-calls/s")
}

type stats struct {
	p50, p99 time.Duration
	rate     float64
}

// measure runs n calls of fn from callers goroutines and returns the
// latency percentiles and the throughput.
func measure(b *testing.B, n, callers int, fn func() error) stats {
	lat := make([]time.Duration, n)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		failed  error
	)
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := fn(); err != nil {
					errOnce.Do(func() { failed = err })
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed != nil {
		b.Fatal(failed)
	}
	slices.Sort(lat)
	return stats{
		p50:  lat[n/2],
		p99:  lat[min(n-1, n*99/100)],
		rate: float64(n) / elapsed.Seconds(),
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
