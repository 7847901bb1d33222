package discovery_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// Benchmark shape: 20 servers of 50 tools each.
const (
	benchServers = 20
	benchTools   = 50
)

// BenchmarkToolsListWarm measures mcpbus.tools.list on a warm cache over
// NATS (embedded server, request to reply bytes) against the same lookup
// done in-process (the cache called directly), in one run. It reports the
// p50 and p99 of each, the ratio of the p50s, and the p50 of a bare NATS
// responder sending a reply of the same size (the transport's floor).
func BenchmarkToolsListWarm(b *testing.B) {
	bs := testkit.StartBus(b)
	servers := make([]srvJSON, benchServers)
	for i := range servers {
		f := newFake(b, tools("tool", benchTools)...)
		servers[i] = srvJSON{fmt.Sprintf("srv%02d", i), httpServer(f.URL, "")}
	}
	bs.PublishExtensions(b, cfgOf(servers...))
	// The api answers for personal connections: the bench user has none, as
	// most users will (without an answer every lookup would ask again).
	api := bs.Connect(b)
	if _, err := api.Subscribe(bs.Names.InternalPersonal(), func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"user_id":"bench","servers":[]}`))
	}); err != nil {
		b.Fatal(err)
	}
	if err := api.Flush(); err != nil {
		b.Fatal(err)
	}
	svc, err := discovery.New(discovery.Config{}, discovery.Deps{Log: observability.Discard(), NC: bs.Connect(b), Names: bs.Names, JS: bs.JS, KV: bs.KV})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })

	// Warm: the whole catalog is published.
	var reply bus.ToolsListReply
	testkit.Eventually(b, 60*time.Second, "the warm catalog", func() bool {
		reply, err = bus.Request[bus.ToolsListReply](context.Background(), bs.NC, bs.Names.ToolsList(), bus.ToolsListRequest{})
		return err == nil && len(reply.Tools) == benchServers*benchTools
	})
	client := bs.Connect(b)
	req := []byte(`{"user_id":"bench","thread_id":"t1"}`)
	size := len(mustRaw(b, client, bs.Names.ToolsList(), req))

	// The transport's floor: a bare responder sending the same number of
	// bytes, no service behind it.
	floorPayload := make([]byte, size)
	echo := bs.Connect(b)
	if _, err := echo.Subscribe("bench.floor", func(m *nats.Msg) { _ = m.Respond(floorPayload) }); err != nil {
		b.Fatal(err)
	}
	if err := echo.Flush(); err != nil {
		b.Fatal(err)
	}

	var overNATS, inProcess, floor []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		msg, err := client.Request(bs.Names.ToolsList(), req, 10*time.Second)
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if len(msg.Data) != size {
			b.Fatalf("reply of %d bytes, want %d", len(msg.Data), size)
		}
		r, err := svc.Lookup(ctx, bus.ToolsListRequest{UserID: "bench", ThreadID: "t1"})
		t2 := time.Now()
		if err != nil || len(r.Tools) != benchServers*benchTools {
			b.Fatalf("in-process lookup: %d tools, %v", len(r.Tools), err)
		}
		if _, err := client.Request("bench.floor", req, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		overNATS = append(overNATS, t1.Sub(t0))
		inProcess = append(inProcess, t2.Sub(t1))
		floor = append(floor, time.Since(t2))
	}
	b.StopTimer()
	np50, np99 := percentiles(overNATS)
	ip50, ip99 := percentiles(inProcess)
	b.ReportMetric(float64(np50.Microseconds()), "nats-p50-µs")
	b.ReportMetric(float64(np99.Microseconds()), "nats-p99-µs")
	b.ReportMetric(float64(ip50.Nanoseconds())/1e3, "inproc-p50-µs")
	b.ReportMetric(float64(ip99.Nanoseconds())/1e3, "inproc-p99-µs")
	b.ReportMetric(float64(np50)/float64(max(ip50, 1)), "nats/inproc-p50")
	fp50, _ := percentiles(floor)
	b.ReportMetric(float64(fp50.Microseconds()), "floor-p50-µs")
	b.ReportMetric(float64(size), "reply-bytes")
}

// mustRaw sends one raw tools.list request and returns the reply bytes.
func mustRaw(b *testing.B, nc *nats.Conn, subject string, req []byte) []byte {
	b.Helper()
	msg, err := nc.Request(subject, req, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	return msg.Data
}

// percentiles returns the p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
