package main_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

// TestReadAndPromptGetRelayProgressAndLogMessages: a resources/read and a
// prompts/get through /mcp (a 2025-11-25 session on api replica A, the
// upstream on a toolcall replica) and through `mcpbus stdio` relay the upstream's
// notifications/progress with the client's own progressToken and its
// notifications/message at or above the session's logging/setLevel, as a
// tools/call does; a request without a token and before any level gets
// neither.
func TestReadAndPromptGetRelayProgressAndLogMessages(t *testing.T) {
	t.Parallel()
	st := startSubStack(t)
	t.Run("mcp", func(t *testing.T) { checkReadAndGetProgress(t, mcpClient(t, st.apiA, mcpAliceKey)) })
	t.Run("stdio", func(t *testing.T) {
		checkReadAndGetProgress(t, mcpbusStdio(t, st.dir, st.natsURL, "alice", "progress"))
	})
	// 2026-07-28 on replica B: the level is the request's _meta one.
	t.Run("modern", func(t *testing.T) {
		c := mcpClient(t, st.apiB, mcpAliceKey)
		seen := watchNotifications(c)
		modernInitialized(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		meta := &mcp.Meta{ProgressToken: "m-1", AdditionalFields: map[string]any{"io.modelcontextprotocol/logLevel": "error"}}
		if _, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "mcpbus://fed/" + demo.ProgressURI, Meta: meta}}); err != nil {
			t.Fatal(err)
		}
		got := seen.all()
		for _, w := range []string{"progress m-1 read step 1", "progress m-1 read step 2", "message read error", "message read emergency"} {
			if !slices.Contains(got, w) {
				t.Errorf("missing %q; got %v", w, got)
			}
		}
		if slices.Contains(got, "message read warning") {
			t.Errorf("a message below the request's level error was relayed: %v", got)
		}
	})
}

// checkReadAndGetProgress reads demo://progress and gets the progress
// prompt on c, without and then with a progressToken and the session's
// level warning.
func checkReadAndGetProgress(t *testing.T, c *client.Client) {
	seen := watchNotifications(c)
	initialized(t, c, mcp.ProtocolVersion20251125)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	uri := "mcpbus://fed/" + demo.ProgressURI
	read := func(token any) {
		t.Helper()
		req := mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}}
		if token != nil {
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
		}
		res, err := c.ReadResource(ctx, req)
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("resources/read %s: %v %v", uri, res, err)
		}
	}
	get := func(token any) {
		t.Helper()
		req := mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "fed_" + demo.ProgressPrompt}}
		if token != nil {
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
		}
		res, err := c.GetPrompt(ctx, req)
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("prompts/get: %v %v", res, err)
		}
	}

	// Neither asked: nothing relayed.
	read(nil)
	get(nil)
	if n := len(seen.all()); n != 0 {
		t.Fatalf("%d notifications without a progressToken or a log level: %v", n, seen.all())
	}

	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelWarning}}); err != nil {
		t.Fatal(err)
	}
	read("read-1")
	get("get-1")
	got := seen.all()
	want := []string{
		"progress read-1 read step 1", "progress read-1 read step 2",
		"message read warning", "message read error", "message read critical", "message read alert", "message read emergency",
		"progress get-1 prompt step 1", "progress get-1 prompt step 2",
		"message prompt warning", "message prompt error", "message prompt critical", "message prompt alert", "message prompt emergency",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing %q; got %v", w, got)
		}
	}
	for _, g := range got {
		if strings.Contains(g, " debug") || strings.Contains(g, " info") || strings.Contains(g, " notice") {
			t.Errorf("a message below the session's level warning was relayed: %q", g)
		}
	}
}

// all is every notification received so far as "<kind> ...": progress
// with its token and message, log messages with their data.
func (n *notifications) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.got {
		f := m.Params.AdditionalFields
		switch m.Method {
		case string(mcp.MethodNotificationProgress):
			out = append(out, fmt.Sprintf("progress %v %v", f["progressToken"], f["message"]))
		case string(mcp.MethodNotificationMessage):
			out = append(out, fmt.Sprintf("message %v", f["data"]))
		default:
			out = append(out, m.Method)
		}
	}
	return out
}
