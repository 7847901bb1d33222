package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// cpuRow is one way of calling the demo server's echo in
// BenchmarkCPUPerCall, with the process that is its gateway.
type cpuRow struct {
	*benchRow
	// gw is the gateway's pid, 0 for the direct row (no gateway); more
	// are the gateway's further processes (serve mode: the NATS server
	// and each service but the api).
	gw   int
	more []int
	// dev marks the rows served by `mcpbus dev`, whose allocations are
	// read from its Go runtime counters.
	dev bool
}

// cpuTotals adds up one row's rounds in one sub-benchmark.
type cpuTotals struct {
	gw, upstream, loadgen int64   // CPU ticks
	mallocs, bytes        float64 // the dev process's, dev rows only
	p50s                  []time.Duration
}

// BenchmarkCPUPerCall measures the CPU that each process spends per call
// of the demo server's echo over stdio, read from /proc/<pid>/stat
// (utime+stime) around each row's calls, every reply checked, all rows
// in one run in interleaved rounds (5 per sub-benchmark), at 1 caller and
// at 32:
//
//   - direct: mcp-go's stdio client in this process (no gateway);
//   - relay: the relay floor (relay_bench_test.go), lean generator;
//   - mcp: `mcpbus dev`'s /mcp, lean generator;
//   - mcp-virtual: the same through the virtual server "bench"
//     (/mcp/v/bench): the set's checks on every call, no quota;
//   - mcp-read: a resources/read of a small text resource through /mcp
//     (the demo server with -federation), lean generator;
//   - nats: `mcpbus.tools.call` on dev's embedded NATS (this process
//     connects as a client of the bus would);
//   - rest: dev's POST /api/mcp/tools/{name}/call, lean HTTP poster;
//   - mcp-serve: /mcp of `mcpbus serve` mode, each service (tokens,
//     discovery, toolcall, api) a process of its own on a NATS server
//     process of its own (nats-server, JetStream on), lean generator: the
//     gateway's CPU is all of these processes';
//   - supergateway-sse, mcp-proxy-sse: the npm gateways, stdio → SSE,
//     lean generator;
//   - supergateway-http, mcp-proxy-http: the same gateways, stdio →
//     stateful streamable HTTP (mcp-proxy without its event store), lean
//     generator.
//
// Per row it reports the CPU µs per call of the gateway's processes
// (everything under its pid but the demo server), of the upstream demo
// server, and of the load generator (this process, which holds the
// direct row's client), and the gateway's CPU against the relay floor's
// in the same sub-benchmark (the number to compare across runs on a busy
// machine). For the dev rows it reports the allocations and bytes the dev
// process allocated per call (go_memstats_* on its /metrics, less one
// scrape's own), and at 1 caller each row's p50 latency added over the
// direct call (per round, median of the rounds). Times are not asserted.
func BenchmarkCPUPerCall(b *testing.B) {
	sides := startBenchSides(b)
	serve := startServeSide(b, sides.dir)
	sgHTTP, mpHTTP := startNPMStreamable(b, sides.dir)
	ctx := context.Background()
	api := "http://" + sides.apiAddr
	nc, err := bus.Connect(devNATSURL(b, sides.dir), "bench", bus.Auth{TokenFile: filepath.Join(sides.dir, ".mcpbus", "nats.token")}, observability.Discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	rest := restRow(api)
	testkit.Eventually(b, 60*time.Second, "echo_echo callable over REST", func() bool { return rest.call(ctx) == nil })
	lean := func(name string, open func() (leanClient, error)) *benchRow { return leanRow(b, name, open) }
	rows := []*cpuRow{
		{benchRow: mcpgoRow(b, ctx, "direct", "echo", transport.NewStdio(demoBin, nil))},
		{benchRow: lean("relay", func() (leanClient, error) {
			return newLeanStreamable(ctx, "http://"+sides.relayAddr+"/mcp", "echo")
		}), gw: sides.relayPID},
		{benchRow: lean("mcp", func() (leanClient, error) { return newLeanStreamable(ctx, api+"/mcp", "echo_echo") }),
			gw: sides.devPID, dev: true},
		{benchRow: lean("mcp-virtual", func() (leanClient, error) { return newLeanStreamable(ctx, api+"/mcp/v/bench", "echo_echo") }),
			gw: sides.devPID, dev: true},
		// A resources/read of a small text resource of the same demo
		// server binary (as server "fed", with -federation) through /mcp.
		{benchRow: lean("mcp-read", func() (leanClient, error) {
			return newLeanStreamableBody(ctx, api+"/mcp", newLeanReadBody("mcpbus://fed/"+demo.GreetingURI))
		}), gw: sides.devPID, dev: true},
		{benchRow: lean("mcp-serve", func() (leanClient, error) {
			return newLeanStreamable(ctx, "http://"+serve.apiAddr+"/mcp", "echo_echo")
		}), gw: serve.apiPID, more: serve.pids},
		{benchRow: natsRow(nc), gw: sides.devPID, dev: true},
		{benchRow: rest, gw: sides.devPID, dev: true},
		{benchRow: lean("supergateway-sse", func() (leanClient, error) {
			return newLeanSSE(ctx, "http://"+sides.sgAddr+"/sse", "echo")
		}), gw: sides.sgPID},
		{benchRow: lean("mcp-proxy-sse", func() (leanClient, error) {
			return newLeanSSE(ctx, "http://"+sides.mpAddr+"/sse", "echo")
		}), gw: sides.mpPID},
		{benchRow: lean("supergateway-http", func() (leanClient, error) {
			return newLeanStreamable(ctx, "http://"+sgHTTP.addr+"/mcp", "echo")
		}), gw: sgHTTP.pid},
		{benchRow: lean("mcp-proxy-http", func() (leanClient, error) {
			return newLeanStreamable(ctx, "http://"+mpHTTP.addr+"/mcp", "echo")
		}), gw: mpHTTP.pid},
	}
	for _, r := range rows {
		benchCalls(b, r.benchRow, benchCallers, benchCallers, nil) // warm the sessions and connections
	}
	for _, callers := range []int{1, benchCallers} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) { runCPURows(b, rows, callers, api) })
	}
}

// runCPURows makes b.N calls per row from callers goroutines in five
// interleaved rounds and reports each row's figures.
func runCPURows(b *testing.B, rows []*cpuRow, callers int, api string) {
	totals := make([]cpuTotals, len(rows))
	for _, n := range benchRounds(b.N) {
		for j, r := range rows {
			t := &totals[j]
			var m0, b0, scrapeM, scrapeB float64
			if r.dev {
				m, bb := devMemStats(b, api)
				m0, b0 = devMemStats(b, api)
				scrapeM, scrapeB = m0-m, b0-bb // what one scrape allocates
			}
			var lat []time.Duration
			before := splitCPU(procTable(b), r.gw, r.more...)
			benchCalls(b, r.benchRow, n, callers, &lat)
			after := splitCPU(procTable(b), r.gw, r.more...)
			if r.dev {
				m1, b1 := devMemStats(b, api)
				t.mallocs += m1 - m0 - scrapeM
				t.bytes += b1 - b0 - scrapeB
			}
			t.gw += after.gw - before.gw
			t.upstream += after.upstream - before.upstream
			t.loadgen += after.loadgen - before.loadgen
			slices.Sort(lat)
			t.p50s = append(t.p50s, lat[len(lat)/2])
		}
	}
	b.StopTimer()

	perCall := func(ticks int64) float64 {
		return float64(time.Duration(ticks)*time.Second/clockTicks) / float64(time.Microsecond) / float64(b.N)
	}
	relayGW := perCall(totals[slices.IndexFunc(rows, func(r *cpuRow) bool { return r.name == "relay" })].gw)
	for j, r := range rows {
		t := totals[j]
		if r.gw != 0 {
			b.ReportMetric(perCall(t.gw), r.name+"-gw-µs/call")
			b.ReportMetric(perCall(t.gw)/relayGW, r.name+"-gw/relay-gw")
		}
		b.ReportMetric(perCall(t.upstream), r.name+"-upstream-µs/call")
		b.ReportMetric(perCall(t.loadgen), r.name+"-loadgen-µs/call")
		if r.dev {
			b.ReportMetric(t.mallocs/float64(b.N), r.name+"-gw-allocs/call")
			b.ReportMetric(t.bytes/float64(b.N), r.name+"-gw-B/call")
		}
		if callers == 1 && j > 0 {
			added := make([]time.Duration, len(t.p50s))
			for k := range added {
				added[k] = t.p50s[k] - totals[0].p50s[k]
			}
			b.ReportMetric(float64(median(added))/float64(time.Microsecond), r.name+"-added-p50-µs")
		}
	}
	if callers == 1 {
		b.ReportMetric(float64(median(totals[0].p50s))/float64(time.Microsecond), "direct-p50-µs")
	}
}

// median is the median of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// demoComm is the demo server's process name in /proc/<pid>/stat.
func demoComm() string {
	name := filepath.Base(demoBin)
	return name[:min(len(name), 15)]
}

// cpuSplit is CPU ticks of one row's processes so far: the gateway's, its
// upstream demo server's and the load generator's (this process's own).
type cpuSplit struct{ gw, upstream, loadgen int64 }

// splitCPU splits procs among a row whose gateway is pid gw and the
// processes more (0: the direct row, whose demo server is this process's
// child).
func splitCPU(procs map[int]procStat, gw int, more ...int) cpuSplit {
	self := os.Getpid()
	s := cpuSplit{loadgen: procs[self].ticks}
	demo := demoComm()
	for pid, p := range procs {
		switch {
		case gw == 0:
			if p.ppid == self && p.comm == demo {
				s.upstream += p.ticks
			}
		case !descends(procs, pid, gw) && !slices.ContainsFunc(more, func(root int) bool { return descends(procs, pid, root) }):
		case p.comm == demo:
			s.upstream += p.ticks
		default:
			s.gw += p.ticks
		}
	}
	return s
}

// devMemStats reads the dev process's Go allocation counters from its
// /metrics: objects and bytes allocated so far.
func devMemStats(b *testing.B, api string) (mallocs, bytes float64) {
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		b.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		var dst *float64
		switch name {
		case "go_memstats_mallocs_total":
			dst = &mallocs
		case "go_memstats_alloc_bytes_total":
			dst = &bytes
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			b.Fatalf("/metrics %s: %v", name, err)
		}
		found++
	}
	if found != 2 {
		b.Fatalf("/metrics: go_memstats_mallocs_total and go_memstats_alloc_bytes_total not both found (status %d)", resp.StatusCode)
	}
	return mallocs, bytes
}

// natsRow calls echo_echo with mcpbus.tools.call on nc.
func natsRow(nc *nats.Conn) *benchRow {
	req := bus.Call{Tool: "echo_echo", Arguments: json.RawMessage(`{"message":"ping"}`), UserID: "default"}
	return &benchRow{name: "nats", call: func(ctx context.Context) error {
		r, err := bus.Request[bus.ToolsCallReply](ctx, nc, bus.Names{}.ToolsCall(), req)
		if err == nil && (r.IsError || len(r.Content) == 0) {
			err = fmt.Errorf("is_error or no content: %+v", r)
		}
		return err
	}}
}

// restRow calls echo_echo with POST /api/mcp/tools/echo_echo/call on the
// api at base, with the lean generator's HTTP poster.
func restRow(base string) *benchRow {
	u, _ := url.Parse(base)
	poster := newRawPoster(u.Host, "/api/mcp/tools/echo_echo/call", "")
	body := []byte(`{"arguments":{"message":"ping"}}`)
	return &benchRow{name: "rest", call: func(ctx context.Context) error {
		resp, err := poster.post(ctx, body)
		if err != nil {
			return err
		}
		var r bus.ToolsCallReply
		if resp.status != http.StatusOK || json.Unmarshal(resp.body, &r) != nil || r.IsError || len(r.Content) == 0 {
			return fmt.Errorf("status %d: %s", resp.status, resp.body)
		}
		return nil
	}}
}

// serveSide is `mcpbus serve` mode for BenchmarkCPUPerCall: a NATS server
// process and one process per service, the demo server as "echo".
type serveSide struct {
	apiAddr string
	apiPID  int
	// pids are the NATS server's and the services' but the api's.
	pids []int
}

// startServeSide starts nats-server (JetStream on, in dir) and tokens,
// discovery, toolcall and api with `mcpbus serve`, each its own process,
// on the memory database (a plain call of a stdio tool reads nothing the
// services would share there), and waits until /mcp can call echo_echo.
func startServeSide(b *testing.B, dir string) *serveSide {
	natsBin, err := exec.LookPath("nats-server")
	if err != nil {
		b.Fatalf("serve mode needs a nats-server binary on PATH: %v", err)
	}
	dir = filepath.Join(dir, "serve")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	natsAddr, apiAddr := freeAddr(b), freeAddr(b)
	host, port, _ := net.SplitHostPort(natsAddr)
	ext := fmt.Sprintf(`{"mcpServers": {"echo": {"type": "stdio", "command": %q}}}`, demoBin)
	settings := fmt.Sprintf("nats:\n  url: nats://%s\napi:\n  listen: %s\nlog:\n  level: warn\ndatabase:\n  backend: memory\n", natsAddr, apiAddr)
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s := &serveSide{apiAddr: apiAddr}
	s.pids = append(s.pids, benchProcess(b, "nats-server", &testkit.SyncBuffer{}, dir, nil, natsBin,
		"-a", host, "-p", port, "-js", "-sd", filepath.Join(dir, "js")))
	waitListening(b, natsAddr)
	for _, svc := range []string{"tokens", "discovery", "toolcall", "api"} {
		pid := benchProcess(b, "mcpbus serve "+svc, &testkit.SyncBuffer{}, dir, []string{"MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL="}, mcpbusBin, "serve", svc)
		if svc == "api" {
			s.apiPID = pid
		} else {
			s.pids = append(s.pids, pid)
		}
	}
	rest := restRow("http://" + apiAddr)
	testkit.Eventually(b, 60*time.Second, "echo_echo callable in serve mode", func() bool { return rest.call(context.Background()) == nil })
	return s
}

// npmSide is one npm gateway process: its address and pid.
type npmSide struct {
	addr string
	pid  int
}

// startNPMStreamable starts supergateway and mcp-proxy in front of the
// demo server with stateful streamable HTTP at /mcp (their dearer mode,
// see BenchmarkMCPEndpoint) and waits until both listen.
func startNPMStreamable(b *testing.B, dir string) (sg, mp npmSide) {
	node, supergateway, mcpProxy := benchDeps(b)
	sg.addr, mp.addr = freeAddr(b), freeAddr(b)
	_, sgPort, _ := net.SplitHostPort(sg.addr)
	_, mpPort, _ := net.SplitHostPort(mp.addr)
	sg.pid = benchProcess(b, "supergateway (streamable HTTP)", &testkit.SyncBuffer{}, dir, nil, node, supergateway,
		"--stdio", demoBin, "--port", sgPort, "--outputTransport", "streamableHttp", "--stateful", "--logLevel", "none")
	mp.pid = benchProcess(b, "mcp-proxy (streamable HTTP)", &testkit.SyncBuffer{}, dir, nil, node, mcpProxy,
		"--host", "127.0.0.1", "--port", mpPort, "--server", "stream", "--", demoBin)
	for _, a := range []string{sg.addr, mp.addr} {
		waitListening(b, a)
	}
	return sg, mp
}
