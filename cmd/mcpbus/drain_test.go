package main_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// gateServer is an HTTP MCP server whose "wait" tool answers only once
// release is closed (entered is closed when the first call arrives) and
// whose "ping" answers at once.
func gateServer(t *testing.T) (url string, entered, release chan struct{}) {
	t.Helper()
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	s := server.NewMCPServer("gate", "1.0.0")
	s.AddTool(mcp.NewTool("wait", mcp.WithDescription("Answers once the test releases it.")), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
			return mcp.NewToolResultText("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	s.AddTool(mcp.NewTool("ping", mcp.WithDescription("Answers pong.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", entered, release
}

// TestServeToolcallDrainsOnSIGTERM: SIGTERM to `mcpbus serve toolcall`
// while a call is in flight stops it accepting (a new call is refused with
// unavailable at once, not left waiting), lets the call complete, and then
// exits cleanly.
func TestServeToolcallDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	url, entered, release := gateServer(t)
	b := testkit.StartBus(t)
	b.PublishExtensions(t, fmt.Sprintf(`{"mcpServers": {"gate": {"type": "http", "url": %q}}}`, url))
	serve := func(service string) *process {
		return startProcess(t, t.TempDir(), service, mcpbusBin, "serve", service, "--nats-url", b.URL, "--namespace", b.Names.Namespace())
	}
	serve("discovery")
	tc := serve("toolcall")
	call := func(ctx context.Context, tool string) (bus.ToolsCallReply, error) {
		return bus.Request[bus.ToolsCallReply](ctx, b.NC, b.Names.ToolsCall(), bus.Call{Tool: tool, UserID: "u", ThreadID: "t"})
	}
	testkit.Eventually(t, 60*time.Second, "toolcall to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := call(ctx, "gate_ping")
		return err == nil
	})

	type result struct {
		reply bus.ToolsCallReply
		err   error
	}
	inflight := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := call(ctx, "gate_wait")
		inflight <- result{r, err}
	}()
	<-entered
	if err := tc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "toolcall to start draining", func() bool {
		return strings.Contains(tc.out.String(), "service draining")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := call(ctx, "gate_ping")
	var be *bus.Error
	if !errors.As(err, &be) || be.Code != bus.CodeUnavailable {
		t.Fatalf("a new call while toolcall drains: %v, want code %s", err, bus.CodeUnavailable)
	}
	close(release)
	r := <-inflight
	if r.err != nil || r.reply.IsError || len(r.reply.Content) == 0 || !strings.Contains(string(r.reply.Content[0]), "released") {
		t.Fatalf("the in-flight call: %+v %v, want its result", r.reply, r.err)
	}
	if err := tc.cmd.Wait(); err != nil {
		t.Fatalf("toolcall exit after the drain: %v", err)
	}
}
