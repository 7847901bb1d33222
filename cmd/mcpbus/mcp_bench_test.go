package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// BenchmarkMCPEndpoint compares calls of the demo server's echo over stdio
// made through mcpbus's /mcp (mcp-go's streamable HTTP client, `mcpbus
// dev` with its embedded NATS: api, toolcall, the stdio session) with the
// same server called directly by mcp-go's stdio client, 32 concurrent
// callers each way, in interleaved rounds of one run. The metrics are each
// path's calls/s and their ratio (the issue asks mcp/direct >= 0.45).
func BenchmarkMCPEndpoint(b *testing.B) {
	const callers = 32
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	apiAddr := ln.Addr().String()
	_ = ln.Close()
	ext := fmt.Sprintf(`{"mcpServers": {"echo": {"type": "stdio", "command": %q}}}`, demoBin)
	settings := fmt.Sprintf("api:\n  listen: %s\n", apiAddr)
	for name, content := range map[string]string{"extensions_config.json": ext, "config.yaml": settings} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	out := &testkit.SyncBuffer{}
	dev := exec.Command(mcpbusBin, "dev", "--nats-port", "-1")
	dev.Dir, dev.Stdout, dev.Stderr = dir, out, out
	dev.Env = append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_DATABASE_URL=")
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := dev.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = syscall.Kill(-dev.Process.Pid, syscall.SIGTERM)
		_ = dev.Wait()
		if b.Failed() {
			b.Logf("--- output of mcpbus dev ---\n%s", out.String())
		}
	})
	testkit.Eventually(b, 60*time.Second, "dev mode to say it is running", func() bool {
		return strings.Contains(out.String(), "mcpbus dev is running")
	})

	ctx := context.Background()
	// A client that keeps a connection per caller, as a real MCP client
	// with concurrent calls would (net/http's default keeps 2 per host:
	// the other 30 callers would dial and close a connection per call).
	tr, err := transport.NewStreamableHTTP("http://"+apiAddr+"/mcp", transport.WithHTTPBasicClient(mcpclient.SharedHTTPClient()))
	if err != nil {
		b.Fatal(err)
	}
	gw := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	direct := client.NewClient(transport.NewStdio(demoBin, nil), client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	for _, c := range []*client.Client{gw, direct} {
		b.Cleanup(func() { _ = c.Close() })
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := c.Initialize(ictx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.ProtocolVersion20251125,
			ClientInfo: mcp.Implementation{Name: "bench", Version: "1"}}})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	testkit.Eventually(b, 60*time.Second, "echo_echo in the catalog", func() bool {
		res, err := gw.ListTools(ctx, mcp.ListToolsRequest{})
		return err == nil && slices.ContainsFunc(res.Tools, func(t mcp.Tool) bool { return t.Name == "echo_echo" })
	})

	// run makes n calls of name on c from callers goroutines and returns
	// how long they took.
	run := func(c *client.Client, name string, n int) time.Duration {
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
					var req mcp.CallToolRequest
					req.Params.Name, req.Params.Arguments = name, map[string]any{"message": "ping"}
					cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
					res, err := c.CallTool(cctx, req)
					cancel()
					if err == nil && res.IsError {
						err = fmt.Errorf("%s: isError", name)
					}
					if err != nil {
						mu.Lock()
						fail = err
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
	run(gw, "echo_echo", callers) // warm the stdio session
	run(direct, "echo", callers)

	b.ResetTimer()
	var gwTime, directTime time.Duration
	const rounds = 5
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		if n == 0 {
			continue
		}
		directTime += run(direct, "echo", n)
		gwTime += run(gw, "echo_echo", n)
	}
	b.StopTimer()
	gwRate := float64(b.N) / gwTime.Seconds()
	directRate := float64(b.N) / directTime.Seconds()
	b.ReportMetric(gwRate, "mcp-calls/s")
	b.ReportMetric(directRate, "direct-calls/s")
	b.ReportMetric(gwRate/directRate, "mcp/direct-calls/s")
}
