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
// request/reply on the same bus (bus-floor). A third path, the relay, is
// the least any gateway on the bus can cost (one NATS hop to a responder
// that calls the upstream with the direct client): relay/direct-calls/s is
// the ceiling this machine puts on gw/direct-calls/s.
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
	req := bus.Call{Tool: "bench_echo", Arguments: args, UserID: "bench", ThreadID: "t"}
	gatewayCall := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := bus.Request[bus.ToolsCallReply](ctx, e.bus.NC, e.bus.Names.ToolsCall(), req)
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
	// The least any gateway on the bus can cost: a relay that answers each
	// request by calling the upstream with the direct client and replying
	// with the result's text, with no decoding, routing or credentials.
	relayNC := e.bus.Connect(b)
	if _, err := relayNC.Subscribe("bench.relay", func(m *nats.Msg) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var r mcp.CallToolRequest
			r.Params.Name, r.Params.Arguments = "echo", args
			res, err := direct.CallTool(ctx, r)
			if err != nil {
				_ = m.Respond([]byte(err.Error()))
				return
			}
			_ = m.Respond([]byte(res.Content[0].(mcp.TextContent).Text))
		}()
	}); err != nil {
		b.Fatal(err)
	}
	_ = relayNC.Flush()
	relayCall := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := e.bus.NC.RequestWithContext(ctx, "bench.relay", reqBody)
		return err
	}
	// Warm up every path (the gateway's first call opens its session).
	for range 20 {
		for _, call := range []func() error{directCall, gatewayCall, relayCall} {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	}

	// Interleaved rounds, so that drift in what else the machine is doing
	// falls on every path alike.
	d, g, rl := &series{}, &series{}, &series{}
	b.ResetTimer()
	const rounds = 5
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		d.run(b, n, callers, directCall)
		g.run(b, n, callers, gatewayCall)
		rl.run(b, n, callers, relayCall)
	}
	b.StopTimer()
	fl := &series{}
	fl.run(b, min(b.N, 2000), callers, floorCall)

	b.ReportMetric(us(d.p(50)), "direct-p50-µs")
	b.ReportMetric(us(d.p(99)), "direct-p99-µs")
	b.ReportMetric(d.rate(), "direct-calls/s")
	b.ReportMetric(us(g.p(50)), "gw-p50-µs")
	b.ReportMetric(us(g.p(99)), "gw-p99-µs")
	b.ReportMetric(g.rate(), "gw-calls/s")
	b.ReportMetric(us(g.p(50)-d.p(50)), "added-p50-µs")
	b.ReportMetric(us(rl.p(50)-d.p(50)), "relay-added-p50-µs")
	b.ReportMetric(us(fl.p(50)), "bus-floor-p50-µs")
	b.ReportMetric(float64(g.p(50))/float64(d.p(50)), "gw/direct-p50")
	b.ReportMetric(g.rate()/d.rate(), "gw/direct-calls/s")
	b.ReportMetric(rl.rate()/d.rate(), "relay/direct-calls/s")
}

// series accumulates the latencies and the elapsed time of one path's
// calls over several runs.
type series struct {
	lat     []time.Duration
	elapsed time.Duration
	sorted  bool
}

// run makes n calls of fn from callers goroutines.
func (s *series) run(b *testing.B, n, callers int, fn func() error) {
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
	s.elapsed += time.Since(start)
	if failed != nil {
		b.Fatal(failed)
	}
	s.lat = append(s.lat, lat...)
	s.sorted = false
}

// p is the q-th percentile latency.
func (s *series) p(q int) time.Duration {
	if !s.sorted {
		slices.Sort(s.lat)
		s.sorted = true
	}
	return s.lat[min(len(s.lat)-1, len(s.lat)*q/100)]
}

// rate is calls per second over the runs.
func (s *series) rate() float64 { return float64(len(s.lat)) / s.elapsed.Seconds() }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
