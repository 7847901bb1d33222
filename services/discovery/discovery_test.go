package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

func TestDiscoversStdioAndStreamableHTTP(t *testing.T) {
	t.Parallel()
	demoBin := testkit.DemoServer(t)
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	b := start(t, fmt.Sprintf(`{"mcpServers": {
		"demo": {"type": "stdio", "command": %q, "task_toolsets": [
			{"name": "reports", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]},
		"web": {"transport": "http", "url": %q},
		"raw": {"type": "http", "url": %q, "tool_name_prefix": false, "enabled": false}
	}}`, demoBin, hs.URL+"/mcp", hs.URL+"/mcp"))

	r, err := list(t, b)
	if err != nil {
		t.Fatalf("tools.list: %v", err)
	}
	got := names(r)
	for _, want := range []string{"demo_echo", "demo_add", "demo_submit_report", "web_echo", "web_add"} {
		if !slices.Contains(got, want) {
			t.Errorf("catalog lacks %s; got %v", want, got)
		}
	}
	for _, hidden := range []string{"demo_get_report_status", "demo_cancel_report"} {
		if slices.Contains(got, hidden) {
			t.Errorf("runtime-internal task tool %s is offered to agents", hidden)
		}
	}
	if slices.Contains(got, "echo") {
		t.Errorf("a disabled server's tools are listed: %v", got)
	}
	// Config order: every demo_ tool comes before every web_ tool.
	lastDemo, firstWeb := -1, len(got)
	for i, n := range got {
		if strings.HasPrefix(n, "demo_") {
			lastDemo = i
		}
		if strings.HasPrefix(n, "web_") && i < firstWeb {
			firstWeb = i
		}
	}
	if lastDemo > firstWeb {
		t.Errorf("tools are not in config order: %v", got)
	}
	for _, tool := range r.Tools {
		if tool.Name == "web_echo" && (tool.Server != "web" || tool.OriginalName != "echo") {
			t.Errorf("web_echo routes to %s/%s", tool.Server, tool.OriginalName)
		}
		if tool.Name == "demo_submit_report" && tool.TaskToolset != "reports" {
			t.Errorf("demo_submit_report task toolset = %q, want reports", tool.TaskToolset)
		}
	}
	if r.CatalogHash == "" {
		t.Error("catalog hash is empty")
	}
}

func TestFailingServerIsAbsentAndOthersPublish(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	b := start(t, fmt.Sprintf(`{"mcpServers": {
		"broken": {"type": "stdio", "command": "/nonexistent/mcp-server"},
		"web": {"type": "http", "url": %q}
	}}`, hs.URL+"/mcp"))
	r, err := list(t, b)
	if err != nil {
		t.Fatalf("tools.list: %v", err)
	}
	if !slices.Contains(names(r), "web_echo") {
		t.Errorf("healthy server not published: %v", names(r))
	}
	if len(r.FailedServers) != 1 || r.FailedServers[0].Server != "broken" {
		t.Errorf("failed servers = %+v, want broken", r.FailedServers)
	}
}

func TestEveryServerFailingPublishesNothing(t *testing.T) {
	t.Parallel()
	b := start(t, `{"mcpServers": {"broken": {"type": "stdio", "command": "/nonexistent/mcp-server"}}}`)
	_, err := list(t, b)
	if !errors.Is(err, bus.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
}

func TestHungServerTimesOutAlone(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	b := start(t, fmt.Sprintf(`{"mcpServers": {
		"hung": {"type": "stdio", "command": "sleep", "args": ["300"], "session_init_timeout": 0.5},
		"web": {"type": "http", "url": %q}
	}}`, hs.URL+"/mcp"))
	r, err := list(t, b)
	if err != nil {
		t.Fatalf("tools.list: %v", err)
	}
	if len(r.FailedServers) != 1 || !strings.Contains(r.FailedServers[0].Error, "session_init_timeout") {
		t.Errorf("failed servers = %+v, want hung with a session_init_timeout error", r.FailedServers)
	}
	if !slices.Contains(names(r), "web_echo") {
		t.Errorf("healthy server not published: %v", names(r))
	}
}

func TestCacheResetBumpsGeneration(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(server.NewStreamableHTTPServer(demo.NewServer()))
	t.Cleanup(hs.Close)
	b := start(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, hs.URL+"/mcp"))
	before, err := list(t, b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := bus.Request[bus.CacheResetReply](ctx, b.NC, b.Names.CacheReset(), bus.CacheResetRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !reply.Success || reply.Scope != "shared_config" || reply.Generation != before.Generation+1 {
		t.Fatalf("reset reply = %+v (generation before %d)", reply, before.Generation)
	}
	testkit.Eventually(t, 10*time.Second, "catalog of the new generation", func() bool {
		after, err := list(t, b)
		return err == nil && after.Generation == reply.Generation && slices.Contains(names(after), "web_echo")
	})
}
