package main_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/wiring"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// BenchmarkMCPInProcess is a `/mcp` tools/call of the demo server's echo
// (stdio) with every mcpbus service in the benchmark's own process, as
// `mcpbus dev` runs them: the embedded NATS server, the services connected
// to it in memory (nats.InProcessServer), the api's HTTP server on
// loopback. With -benchmem, allocs/op and B/op are the whole process's per
// call: the gateway's (api, toolcall, NATS server and clients, audit,
// background work) plus the load generator's, which client-allocs/op
// reports (the same generator against a listener that answers a canned
// reply without parsing, so that its share can be subtracted);
// gateway-allocs/op is the difference. The demo server is a process of its
// own and not counted. Every reply is checked.
//
// Each era: a 2025-11-25 session's tools/call, and the same call as a
// 2026-07-28 request (per-request _meta and mirrored headers).
//
//	cd cmd/mcpbus && go test -run '^$' -bench '^BenchmarkMCPInProcess$' -benchmem -benchtime 5000x .
func BenchmarkMCPInProcess(b *testing.B) {
	api := startInProcessDev(b)
	ctx := context.Background()
	l, err := newLeanStreamable(ctx, "http://"+api+"/mcp", "echo_echo")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.close)
	testkit.Eventually(b, 60*time.Second, "echo_echo callable over /mcp", func() bool { return l.call(ctx) == nil })
	// The same call as a 2026-07-28 request: no session, the protocol
	// fields in _meta, the mirrored headers.
	modern := &leanStreamable{poster: newRawPoster(api, "/mcp", "Accept: application/json, text/event-stream\r\n"+
		"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo_echo\r\n"),
		body: leanBody{prefix: []byte(`{"jsonrpc":"2.0","id":`), suffix: []byte(`,"method":"tools/call","params":{"name":"echo_echo","arguments":{"message":"ping"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)}}
	b.Cleanup(modern.close)
	if err := modern.call(ctx); err != nil {
		b.Fatalf("2026-07-28 call: %v", err)
	}
	clientAllocs := leanClientAllocs(b)
	for _, c := range []struct {
		era     string
		callers int
		l       *leanStreamable
	}{{"2025-11-25", 1, l}, {"2025-11-25", benchCallers, l}, {"2026-07-28", 1, modern}, {"2026-07-28", benchCallers, modern}} {
		callers, l := c.callers, c.l
		b.Run(fmt.Sprintf("era=%s/callers=%d", c.era, callers), func(b *testing.B) {
			for range 200 { // warm the pools and the connections
				if err := l.call(ctx); err != nil {
					b.Fatal(err)
				}
			}
			var before, after uint64
			before = mallocs()
			b.ReportAllocs()
			b.ResetTimer()
			benchParallel(b, callers, func() error { return l.call(ctx) })
			b.StopTimer()
			after = mallocs()
			perCall := float64(after-before) / float64(b.N)
			b.ReportMetric(clientAllocs, "client-allocs/op")
			b.ReportMetric(perCall-clientAllocs, "gateway-allocs/op")
		})
	}
}

// benchParallel makes b.N calls of call from callers goroutines.
func benchParallel(b *testing.B, callers int, call func() error) {
	var left atomic.Int64
	left.Store(int64(b.N))
	errs := make(chan error, callers)
	for range callers {
		go func() {
			for left.Add(-1) >= 0 {
				if err := call(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range callers {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// leanClientAllocs is what the lean generator allocates per /mcp call of
// its own (request, response read and the reply's check), measured
// against a listener that answers every request with a canned echo reply.
func leanClientAllocs(b *testing.B) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	reply := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ping"}],"isError":false}}`)
	resp := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(reply), reply)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go cannedServe(c, resp)
		}
	}()
	p := newRawPoster(ln.Addr().String(), "/mcp", "Accept: application/json, text/event-stream\r\n")
	b.Cleanup(p.close)
	l := &leanStreamable{poster: p, body: newLeanBody("echo_echo")}
	ctx := context.Background()
	const n = 2000
	for range 100 {
		if err := l.call(ctx); err != nil {
			b.Fatal(err)
		}
	}
	before := mallocs()
	for range n {
		if err := l.call(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return float64(mallocs()-before) / n
}

// cannedServe answers each request read from c (headers and a
// Content-Length body) with resp, allocating nothing per request.
func cannedServe(c net.Conn, resp []byte) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 16<<10)
	for {
		length := 0
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			line = bytes.TrimRight(line, "\r\n")
			if len(line) == 0 {
				break
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				for _, d := range v {
					length = length*10 + int(d-'0')
				}
			}
		}
		if _, err := r.Discard(length); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// startInProcessDev runs every service in this process on an embedded
// NATS server reached in memory, with the demo server as "echo" (stdio),
// and returns the api's address.
func startInProcessDev(b *testing.B) string {
	dir := b.TempDir()
	api := freeAddr(b)
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ns.Shutdown)
	settings := fmt.Sprintf("api:\n  listen: %s\nlog:\n  level: warn\ndatabase:\n  backend: sqlite\n  path: %s\nworkspace:\n  root: %s\n",
		api, filepath.Join(dir, "mcpbus.db"), filepath.Join(dir, "ws"))
	ext := fmt.Sprintf(`{"mcpServers": {"echo": {"type": "stdio", "command": %q}}}`, demoBin)
	for name, content := range map[string]string{"config.yaml": settings, "extensions_config.json": ext} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	rt, err := bootstrap.Load(bootstrap.Options{ConfigPath: filepath.Join(dir, "config.yaml"),
		ExtensionsPath: filepath.Join(dir, "extensions_config.json")}, config.Env{}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	rt.Settings.NATS.URL = ns.URL()
	rt.NATSInProcess = ns.InProcess()
	db, err := backends.MigrateAndOpen(context.Background(), rt.Settings.Database, rt.Log)
	if err != nil {
		b.Fatal(err)
	}
	group, err := wiring.Start(context.Background(), rt, db, wiring.Order, wiring.Hooks{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := group.Stop(); err != nil {
			b.Errorf("stop: %v", err)
		}
		_ = db.Close()
	})
	testkit.Eventually(b, 60*time.Second, "the api to serve", func() bool {
		resp, err := http.Get("http://" + api + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil
	})
	return api
}

// mallocs is the process's count of heap allocations so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}
