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
	c    *client.Client
	tool string
	// elapsed and cpu add up the row's rounds: wall time, and CPU time of
	// this process and every process it started (the gateways, the demo
	// servers) while the row ran.
	elapsed, cpu time.Duration
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
//   - mcp-proxy: through mcp-proxy (npm), stdio to SSE (likewise).
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
	node, supergateway, mcpProxy := benchDeps(b)
	dir := b.TempDir()
	apiAddr := freeAddr(b)
	ext := fmt.Sprintf(`{"mcpServers": {"echo": {"type": "stdio", "command": %q}}}`, demoBin)
	settings := fmt.Sprintf("api:\n  listen: %s\n", apiAddr)
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	out := &testkit.SyncBuffer{}
	benchProcess(b, "mcpbus dev", out, dir, []string{"MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL="}, mcpbusBin, "dev", "--nats-port", "-1")
	testkit.Eventually(b, 60*time.Second, "dev mode to say it is running", func() bool {
		return strings.Contains(out.String(), "mcpbus dev is running")
	})

	// Each npm gateway with its fastest transport (measured, see above):
	// stdio → SSE (2024-11-05), one child for the stdio server. supergateway
	// logs every message at info: logging is off.
	sgAddr, mpAddr := freeAddr(b), freeAddr(b)
	_, sgPort, _ := net.SplitHostPort(sgAddr)
	_, mpPort, _ := net.SplitHostPort(mpAddr)
	benchProcess(b, "supergateway", &testkit.SyncBuffer{}, dir, nil, node, supergateway,
		"--stdio", demoBin, "--port", sgPort, "--outputTransport", "sse", "--logLevel", "none")
	benchProcess(b, "mcp-proxy", &testkit.SyncBuffer{}, dir, nil, node, mcpProxy,
		"--host", "127.0.0.1", "--port", mpPort, "--server", "sse", "--", demoBin)
	for _, a := range []string{sgAddr, mpAddr} {
		testkit.Eventually(b, 60*time.Second, "a gateway to listen on "+a, func() bool {
			c, err := net.Dial("tcp", a)
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		})
	}

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
	rows := []*benchRow{
		{name: "direct", tool: "echo", c: client.NewClient(transport.NewStdio(demoBin, nil), client.WithProtocolVersion(mcp.ProtocolVersion20251125))},
		{name: "mcp", tool: "echo_echo", c: client.NewClient(streamable("http://"+apiAddr+"/mcp"), client.WithProtocolVersion(mcp.ProtocolVersion20251125))},
		{name: "supergateway", tool: "echo", c: client.NewClient(sse("http://"+sgAddr+"/sse"), client.WithProtocolVersion(mcp.ProtocolVersion20251125))},
		{name: "mcp-proxy", tool: "echo", c: client.NewClient(sse("http://"+mpAddr+"/sse"), client.WithProtocolVersion(mcp.ProtocolVersion20251125))},
	}
	ctx := context.Background()
	for _, r := range rows {
		b.Cleanup(func() { _ = r.c.Close() })
		if err := r.c.Start(ctx); err != nil {
			b.Fatalf("%s: start: %v", r.name, err)
		}
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := r.c.Initialize(ictx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20251125,
			ClientInfo: mcp.Implementation{Name: "bench", Version: "1"}}})
		cancel()
		if err != nil {
			b.Fatalf("%s: initialize: %v", r.name, err)
		}
	}
	testkit.Eventually(b, 60*time.Second, "echo_echo in the catalog", func() bool {
		res, err := rows[1].c.ListTools(ctx, mcp.ListToolsRequest{})
		return err == nil && slices.ContainsFunc(res.Tools, func(t mcp.Tool) bool { return t.Name == "echo_echo" })
	})
	for _, r := range rows {
		benchCalls(b, r, benchCallers) // warm the sessions and connections
	}

	b.ResetTimer()
	const rounds = 5
	for i := range rounds {
		n := b.N / rounds
		if i == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		if n == 0 {
			continue
		}
		for _, r := range rows {
			cpu0 := treeCPU(b)
			r.elapsed += benchCalls(b, r, n)
			r.cpu += treeCPU(b) - cpu0
		}
	}
	b.StopTimer()

	rate := map[string]float64{}
	for _, r := range rows {
		rate[r.name] = float64(b.N) / r.elapsed.Seconds()
		b.ReportMetric(rate[r.name], r.name+"-calls/s")
		b.ReportMetric(float64(r.cpu.Microseconds())/float64(b.N), r.name+"-cpu-µs/call")
	}
	for _, r := range rows[1:] {
		b.ReportMetric(rate[r.name]/rate["direct"], r.name+"/direct")
	}
	b.ReportMetric(rate["mcp"]/max(rate["supergateway"], rate["mcp-proxy"]), "mcp/fastest-npm")
}

// benchCalls makes n calls of r's tool from benchCallers goroutines and
// returns how long they took.
func benchCalls(b *testing.B, r *benchRow, n int) time.Duration {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		left = n
		fail error
	)
	start := time.Now()
	for range benchCallers {
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 || fail != nil {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				var req mcp.CallToolRequest
				req.Params.Name, req.Params.Arguments = r.tool, map[string]any{"message": "ping"}
				cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				res, err := r.c.CallTool(cctx, req)
				cancel()
				if err == nil && (res.IsError || len(res.Content) == 0) {
					err = fmt.Errorf("isError or no content: %+v", res)
				}
				if err != nil {
					mu.Lock()
					fail = fmt.Errorf("%s: %s: %w", r.name, r.tool, err)
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
// ends; its output goes to out and is logged if the benchmark fails.
func benchProcess(b *testing.B, what string, out *testkit.SyncBuffer, dir string, env []string, name string, args ...string) {
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
}

// treeCPU is the CPU time (user and system) used so far by this process
// and its live descendants, from /proc.
func treeCPU(b *testing.B) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatalf("read /proc: %v", err)
	}
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ... utime(14) stime(15): comm may hold
		// spaces, so fields count from its closing parenthesis.
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		procs[pid] = proc{ppid: ppid, ticks: ut + st}

	}
	self := os.Getpid()
	var ticks int64
	for pid, p := range procs {
		for q, depth := pid, 0; depth < 64; depth++ {
			if q == self {
				ticks += p.ticks
				break
			}
			parent, ok := procs[q]
			if !ok || q <= 1 {
				break
			}
			q = parent.ppid
		}
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / hz
}
