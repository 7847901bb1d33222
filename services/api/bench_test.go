package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// BenchmarkRESTToolCall measures POST /api/mcp/tools/{name}/call against
// a mcpbus.tools.call responder that answers with eight text blocks of 1 KiB
// (a tool result of a realistic size), 32 concurrent callers. The same run
// makes the same number of bare NATS requests to the responder (the
// floor: what any REST front of the bus pays at least). The metrics are
// each path's calls/s and rest/bus-calls/s, the share of the floor the
// REST path keeps; allocs/op is the REST path's.
func BenchmarkRESTToolCall(b *testing.B) {
	const callers = 32
	blocks := make([]json.RawMessage, 8)
	for i := range blocks {
		blocks[i] = json.RawMessage(`{"type":"text","text":"` + strings.Repeat("x", 1024) + `"}`)
	}
	e := startWith(b, options{callContent: blocks})
	nc := e.bus.Connect(b)
	url := e.base + "/api/mcp/tools/demo_echo/call"
	body := []byte(`{"arguments":{"message":"ping"},"thread_id":"bench"}`)
	client := mcpclient.SharedHTTPClient()

	rest := func() error {
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"demo_echo"`)) {
			return &badReply{status: resp.StatusCode, body: string(out)}
		}
		return nil
	}
	req, _ := json.Marshal(bus.Call{Tool: "demo_echo", Arguments: json.RawMessage(`{"message":"ping"}`), UserID: "default", ThreadID: "bench"})
	floor := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: e.bus.Names.ToolsCall(), Data: req})
		return err
	}
	run := func(fn func() error, n int) time.Duration {
		var wg sync.WaitGroup
		next := make(chan struct{}, n)
		for range n {
			next <- struct{}{}
		}
		close(next)
		start := time.Now()
		for range callers {
			wg.Go(func() {
				for range next {
					if err := fn(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	// Warm both paths (connections, the api's first request).
	run(rest, callers)
	run(floor, callers)
	b.ReportAllocs()
	b.ResetTimer()
	restTook := run(rest, b.N)
	b.StopTimer()
	floorTook := run(floor, b.N)
	restRate := float64(b.N) / restTook.Seconds()
	floorRate := float64(b.N) / floorTook.Seconds()
	b.ReportMetric(restRate, "rest-calls/s")
	b.ReportMetric(floorRate, "bus-calls/s")
	b.ReportMetric(restRate/floorRate, "rest/bus-calls/s")
}

type badReply struct {
	status int
	body   string
}

func (e *badReply) Error() string {
	return "unexpected reply " + http.StatusText(e.status) + ": " + e.body
}
