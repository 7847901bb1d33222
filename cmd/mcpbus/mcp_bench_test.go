package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// benchCallers is how many callers call concurrently in every row.
const benchCallers = 32

// benchRow is one way of calling the demo server's echo.
type benchRow struct {
	name string
	// call makes one call of the demo server's echo and checks its result.
	call func(context.Context) error
	// elapsed and cpu add up the row's rounds: wall time, and CPU time of
	// this process and every process it started (the gateways, the demo
	// servers) while the row ran; devCPU is the mcpbus dev process's alone
	// (not its demo server's), clientCPU this process's (the client).
	elapsed, cpu, devCPU, clientCPU time.Duration
	// relayCPU is the relay process's alone (not its demo server's).
	relayCPU time.Duration
}

// BenchmarkMCPEndpoint compares calls of the demo server's echo over stdio
// (32 concurrent callers each way, in interleaved rounds of one run, one
// benchmark binary) made:
//
//   - direct: by mcp-go's stdio client;
//   - mcp: through mcpbus's /mcp (mcp-go's streamable HTTP client, `mcpbus
//     dev` with its embedded NATS: api, toolcall, the stdio session);
//   - supergateway: through supergateway (npm) in front of the same server,
//     stdio to SSE;
//   - mcp-proxy: through mcp-proxy (npm), stdio to SSE (likewise);
//   - mcp-lean, mcp-sse-lean, supergateway-lean, mcp-proxy-lean: /mcp,
//     mcpbus's /sse and the two npm gateways' SSE driven by the lean load
//     generator (leanload_test.go) instead of mcp-go's client, the same
//     generator for every one of these rows;
//   - relay-lean: the relay floor (relay_bench_test.go), the least any
//     gateway of mcpbus's shape (HTTP → NATS → a service holding an mcp-go
//     stdio client) can cost: a process of its own with a bare net/http
//     server, an embedded NATS server and a responder calling the demo
//     server with one mcp-go stdio client, driven by the lean generator
//     as mcp-lean is. relay-lean/direct is the ceiling this machine puts
//     on mcp-lean/direct.
//
// The mcp-go client's own CPU is a large share of every HTTP row on a
// 2-core machine; the lean rows show the gateways with a client that
// costs little, as gateways are load-tested. The direct row is mcp-go's
// stdio client in both views.
//
// Each npm gateway is run with its fastest transport. Measured here (CPU
// per call over every process, 32 callers): supergateway stdio→SSE ~550µs,
// stateful streamable HTTP ~1250µs, stateless ~4900µs (a child per
// request); mcp-proxy SSE ~840µs, stateful streamable HTTP without its
// event store ~1100µs, with it ~1300µs, stateless ~1530µs.
//
// The metrics are each row's calls/s, the ratio of each to direct and of
// mcp to the faster of the two npm gateways (the issue asks mcp/direct >=
// 0.45 and mcp/fastest-npm >= 5), and each row's CPU per call summed over
// every process involved (a 2-core machine shared with other work bounds
// the rates by CPU). Nothing is asserted about times. The npm gateways
// come from bench/.deps (`make bench-deps`; `make bench` installs them);
// without them the benchmark fails saying so.
func BenchmarkMCPEndpoint(b *testing.B) {
	sides := startBenchSides(b)
	apiAddr, sgAddr, mpAddr, relayAddr, devPID, relayPID := sides.apiAddr, sides.sgAddr, sides.mpAddr, sides.relayAddr, sides.devPID, sides.relayPID

	// HTTP clients keep a connection per caller, as a real MCP client with
	// concurrent calls would (net/http's default keeps 2 per host: the
	// other 30 callers would dial and close a connection per call).
	streamable := func(url string) transport.Interface {
		tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(mcpclient.SharedHTTPClient()))
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	sse := func(url string) transport.Interface {
		tr, err := transport.NewSSE(url, transport.WithHTTPClient(mcpclient.SharedHTTPClient()))
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	ctx := context.Background()
	mcpgo := func(name, tool string, tr transport.Interface) *benchRow { return mcpgoRow(b, ctx, name, tool, tr) }
	lean := func(name string, open func() (leanClient, error)) *benchRow { return leanRow(b, name, open) }
	rows := []*benchRow{
		mcpgo("direct", "echo", transport.NewStdio(demoBin, nil)),
		mcpgo("mcp", "echo_echo", streamable("http://"+apiAddr+"/mcp")),
		mcpgo("supergateway", "echo", sse("http://"+sgAddr+"/sse")),
		mcpgo("mcp-proxy", "echo", sse("http://"+mpAddr+"/sse")),
		lean("mcp-lean", func() (leanClient, error) { return newLeanStreamable(ctx, "http://"+apiAddr+"/mcp", "echo_echo") }),
		lean("mcp-sse-lean", func() (leanClient, error) { return newLeanSSE(ctx, "http://"+apiAddr+"/sse", "echo_echo") }),
		lean("supergateway-lean", func() (leanClient, error) { return newLeanSSE(ctx, "http://"+sgAddr+"/sse", "echo") }),
		lean("mcp-proxy-lean", func() (leanClient, error) { return newLeanSSE(ctx, "http://"+mpAddr+"/sse", "echo") }),
		lean("relay-lean", func() (leanClient, error) { return newLeanStreamable(ctx, "http://"+relayAddr+"/mcp", "echo") }),
	}
	for _, r := range rows {
		benchCalls(b, r, benchCallers, benchCallers, nil) // warm the sessions and connections
	}

	b.ResetTimer()
	for _, n := range benchRounds(b.N) {
		for _, r := range rows {
			cpu0, dev0, client0, relay0 := treeCPU(b), procCPU(b, devPID), procCPU(b, os.Getpid()), procCPU(b, relayPID)
			r.elapsed += benchCalls(b, r, n, benchCallers, nil)
			r.cpu += treeCPU(b) - cpu0
			r.devCPU += procCPU(b, devPID) - dev0
			r.clientCPU += procCPU(b, os.Getpid()) - client0
			r.relayCPU += procCPU(b, relayPID) - relay0
		}
	}
	b.StopTimer()

	rate := map[string]float64{}
	for _, r := range rows {
		rate[r.name] = float64(b.N) / r.elapsed.Seconds()
		b.ReportMetric(rate[r.name], r.name+"-calls/s")
		b.ReportMetric(float64(r.cpu.Microseconds())/float64(b.N), r.name+"-cpu-µs/call")
		b.ReportMetric(float64(r.clientCPU.Microseconds())/float64(b.N), r.name+"-client-cpu-µs/call")
		if strings.HasPrefix(r.name, "mcp-") || r.name == "mcp" {
			if r.name != "mcp-proxy" && r.name != "mcp-proxy-lean" {
				b.ReportMetric(float64(r.devCPU.Microseconds())/float64(b.N), r.name+"-dev-cpu-µs/call")
			}
		}
		if r.name == "relay-lean" {
			b.ReportMetric(float64(r.relayCPU.Microseconds())/float64(b.N), r.name+"-relay-cpu-µs/call")
		}
	}
	for _, r := range rows[1:] {
		b.ReportMetric(rate[r.name]/rate["direct"], r.name+"/direct")
	}
	b.ReportMetric(rate["mcp"]/max(rate["supergateway"], rate["mcp-proxy"]), "mcp/fastest-npm")
	b.ReportMetric(rate["mcp-lean"]/max(rate["supergateway-lean"], rate["mcp-proxy-lean"]), "mcp-lean/fastest-npm-lean")
	b.ReportMetric(rate["mcp-lean"]/rate["relay-lean"], "mcp-lean/relay-lean")
	b.ReportMetric(rate["mcp-sse-lean"]/max(rate["supergateway-lean"], rate["mcp-proxy-lean"]), "mcp-sse-lean/fastest-npm-lean")
}

// mcpgoRow is a row calling tool with mcp-go's client over tr (2025-11-25),
// initialized; for echo_echo (through mcpbus) once the catalog lists it.
func mcpgoRow(b *testing.B, ctx context.Context, name, tool string, tr transport.Interface) *benchRow {
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	b.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		b.Fatalf("%s: start: %v", name, err)
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := c.Initialize(ictx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20251125,
		ClientInfo: mcp.Implementation{Name: "bench", Version: "1"}}})
	cancel()
	if err != nil {
		b.Fatalf("%s: initialize: %v", name, err)
	}
	if tool == "echo_echo" {
		testkit.Eventually(b, 60*time.Second, "echo_echo in the catalog", func() bool {
			res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
			return err == nil && slices.ContainsFunc(res.Tools, func(t mcp.Tool) bool { return t.Name == "echo_echo" })
		})
	}
	return &benchRow{name: name, call: func(ctx context.Context) error {
		var req mcp.CallToolRequest
		req.Params.Name, req.Params.Arguments = tool, map[string]any{"message": "ping"}
		res, err := c.CallTool(ctx, req)
		if err == nil && (res.IsError || len(res.Content) == 0) {
			err = fmt.Errorf("isError or no content: %+v", res)
		}
		return err
	}}
}

// leanRow is a row calling through the lean load generator's client
// that open returns.
func leanRow(b *testing.B, name string, open func() (leanClient, error)) *benchRow {
	c, err := open()
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	b.Cleanup(c.close)
	return &benchRow{name: name, call: c.call}
}

// benchSides are the gateways the benchmarks call the demo server's echo
// through, each a process of its own started by the benchmark: `mcpbus
// dev` (echo as server "echo"), supergateway and mcp-proxy (npm, stdio →
// SSE) and the relay floor (relay_bench_test.go), with their addresses
// and pids.
type benchSides struct {
	dir                                string
	apiAddr, sgAddr, mpAddr, relayAddr string
	devPID, sgPID, mpPID, relayPID     int
}

// startBenchSides starts the gateways and waits until each serves; they
// stop when the benchmark ends.
func startBenchSides(b *testing.B) *benchSides {
	node, supergateway, mcpProxy := benchDeps(b)
	dir := b.TempDir()
	apiAddr := freeAddr(b)
	// "fed" is the demo server with its federation catalog, for
	// BenchmarkCPUPerCall's resources/read row.
	ext := fmt.Sprintf(`{"mcpServers": {"echo": {"type": "stdio", "command": %q}, "fed": {"type": "stdio", "command": %q, "args": ["-federation"]}}}`, demoBin, demoBin)
	// Per-request logging off, as for the npm gateways (supergateway's
	// --logLevel none; mcp-proxy logs no requests by default): at info
	// mcpbus logs every HTTP request served.
	// The virtual server "bench" holds echo_echo (BenchmarkCPUPerCall's
	// mcp-virtual row: the set's policy check on every list and call).
	settings := fmt.Sprintf("api:\n  listen: %s\nlog:\n  level: warn\nvirtual_servers:\n  - {name: bench, servers: [echo], tools: [echo_echo]}\n", apiAddr)
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	out := &testkit.SyncBuffer{}
	devPID := benchProcess(b, "mcpbus dev", out, dir, []string{"MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL="}, mcpbusBin, "dev", "--nats-port", "-1")
	testkit.Eventually(b, 60*time.Second, "dev mode to say it is running", func() bool {
		return strings.Contains(out.String(), "mcpbus dev is running")
	})

	// Each npm gateway with its fastest transport (measured, see above):
	// stdio → SSE (2024-11-05), one child for the stdio server. supergateway
	// logs every message at info: logging is off.
	sgAddr, mpAddr := freeAddr(b), freeAddr(b)
	_, sgPort, _ := net.SplitHostPort(sgAddr)
	_, mpPort, _ := net.SplitHostPort(mpAddr)
	sgPID := benchProcess(b, "supergateway", &testkit.SyncBuffer{}, dir, nil, node, supergateway,
		"--stdio", demoBin, "--port", sgPort, "--outputTransport", "sse", "--logLevel", "none")
	mpPID := benchProcess(b, "mcp-proxy", &testkit.SyncBuffer{}, dir, nil, node, mcpProxy,
		"--host", "127.0.0.1", "--port", mpPort, "--server", "sse", "--", demoBin)
	// The relay floor: this test binary re-executed as the relay process,
	// which prints the address it serves once its upstream is initialized.
	relayOut := &testkit.SyncBuffer{}
	relayPID := benchProcess(b, "bench relay", relayOut, dir, []string{benchRelayEnv + "=" + demoBin}, os.Args[0])
	var relayAddr string
	testkit.Eventually(b, 60*time.Second, "the relay to listen", func() bool {
		_, after, ok := strings.Cut(relayOut.String(), benchRelayListening)
		relayAddr, _, _ = strings.Cut(after, "\n")
		return ok && strings.Contains(after, "\n")
	})
	for _, a := range []string{sgAddr, mpAddr} {
		waitListening(b, a)
	}

	return &benchSides{dir: dir, apiAddr: apiAddr, sgAddr: sgAddr, mpAddr: mpAddr, relayAddr: relayAddr,
		devPID: devPID, sgPID: sgPID, mpPID: mpPID, relayPID: relayPID}
}

// benchRounds splits n calls into the calls of each of five interleaved
// rounds (rounds of none left out), so that the machine's drift falls on
// every row alike.
func benchRounds(n int) []int {
	const rounds = 5
	var out []int
	for i := range rounds {
		k := n / rounds
		if i == rounds-1 {
			k = n - k*(rounds-1)
		}
		if k > 0 {
			out = append(out, k)
		}
	}
	return out
}

// benchCalls makes n calls of r's tool from callers goroutines and
// returns how long they took; with lat non-nil it also appends each
// call's latency to *lat.
func benchCalls(b *testing.B, r *benchRow, n, callers int, lat *[]time.Duration) time.Duration {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		left = n
		fail error
	)
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 || fail != nil {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				t0 := time.Now()
				err := r.call(cctx)
				took := time.Since(t0)
				cancel()
				if lat != nil {
					mu.Lock()
					*lat = append(*lat, took)
					mu.Unlock()
				}
				if err != nil {
					mu.Lock()
					fail = fmt.Errorf("%s: %w", r.name, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if fail != nil {
		b.Fatal(fail)
	}
	return time.Since(start)
}

// benchDeps returns the node binary and the entry scripts of supergateway
// and mcp-proxy that `make bench-deps` installs into bench/.deps
// (MCPBUS_BENCH_DEPS overrides the directory). Missing, the benchmark
// fails with how to install them.
func benchDeps(b *testing.B) (node, supergateway, mcpProxy string) {
	dir := os.Getenv("MCPBUS_BENCH_DEPS")
	if dir == "" {
		dir = filepath.Join("..", "..", "bench", ".deps")
	}
	dir, _ = filepath.Abs(dir)
	nm := filepath.Join(dir, "node_modules")
	node = filepath.Join(nm, ".bin", "node")
	supergateway = filepath.Join(nm, "supergateway", "dist", "index.js")
	mcpProxy = filepath.Join(nm, "mcp-proxy", "dist", "bin", "mcp-proxy.mjs")
	for _, p := range []string{node, supergateway, mcpProxy} {
		if _, err := os.Stat(p); err != nil {
			b.Fatalf("the comparison gateways are not installed (%s is missing): run `make bench-deps` from the repository root "+
				"(or `make bench`, which installs them first; bench/deps.sh installs supergateway, mcp-proxy and Node 22 from npm into bench/.deps)", p)
		}
	}
	return node, supergateway, mcpProxy
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// benchProcess runs name in its own process group until the benchmark
// ends and returns its pid; its output goes to out and is logged if the
// benchmark fails.
func benchProcess(b *testing.B, what string, out *testkit.SyncBuffer, dir string, env []string, name string, args ...string) int {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", what, err)
	}
	b.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if b.Failed() {
			b.Logf("--- output of %s ---\n%s", what, out.String())
		}
	})
	return cmd.Process.Pid
}

// procCPU is the CPU time (user and system) process pid used so far, its
// children not included.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		b.Fatalf("read /proc/%d/stat: %v", pid, err)
	}
	st, _ := parseStat(string(raw))
	return time.Duration(st.ticks) * time.Second / clockTicks
}

// clockTicks is USER_HZ on Linux.
const clockTicks = 100

// procStat is what the benchmarks read of a /proc/<pid>/stat line.
type procStat struct {
	comm  string // the executable's name, at most 15 bytes
	ppid  int
	ticks int64 // user and system CPU ticks, children not included
}

// parseStat reads a /proc/<pid>/stat line: pid (comm) state ppid ...
// utime(14) stime(15). comm may hold spaces and parentheses, so fields
// count from its last closing parenthesis.
func parseStat(s string) (procStat, bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return procStat{comm: s[open+1 : end], ppid: ppid, ticks: ut + st}, true
}

// procTable reads every live process's stat from /proc.
func procTable(b *testing.B) map[int]procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatalf("read /proc: %v", err)
	}
	procs := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if st, ok := parseStat(string(raw)); ok {
			procs[pid] = st
		}
	}
	return procs
}

// descends reports whether pid is root or one of its descendants in procs.
func descends(procs map[int]procStat, pid, root int) bool {
	for q, depth := pid, 0; depth < 64; depth++ {
		if q == root {
			return true
		}
		p, ok := procs[q]
		if !ok || q <= 1 {
			return false
		}
		q = p.ppid
	}
	return false
}

// treeCPU is the CPU time (user and system) used so far by this process
// and its live descendants, from /proc.
func treeCPU(b *testing.B) time.Duration {
	procs, self := procTable(b), os.Getpid()
	var ticks int64
	for pid, p := range procs {
		if descends(procs, pid, self) {
			ticks += p.ticks
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// waitListening waits until something accepts connections on addr.
func waitListening(b *testing.B, addr string) {
	testkit.Eventually(b, 60*time.Second, "a process to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}
