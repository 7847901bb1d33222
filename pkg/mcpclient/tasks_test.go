package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// TestNativeTaskMethods: CallToolTask creates an upstream task (the ttl
// is sent), TaskRequest reads it and its result, and a JSON-RPC error
// (an unknown task) is an *RPCError with its code; a plain CallTool of a
// task-required tool still fails.
func TestNativeTaskMethods(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("tasks", "0", server.WithTaskCapabilities(true, true, true))
	s.AddTool(mcp.NewTool("report", mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("the report"), nil
		})
	// Native tasks are the 2025-11-25 task methods: a legacy-era server
	// (2026-07-28 moved tasks into an extension).
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20251125)))
	t.Cleanup(ts.Close)
	c := connect(t, mcpclient.Spec{Server: "tasks", Transport: "http", URL: ts.URL + "/mcp"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, err := c.CallToolTask(ctx, "report", nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			TTL    int64  `json:"ttl"`
		} `json:"task"`
	}
	if err := json.Unmarshal(raw, &created); err != nil || created.Task.TaskID == "" || created.Task.TTL != 60000 {
		t.Fatalf("CreateTaskResult = %s (%v)", raw, err)
	}
	res, err := c.TaskRequest(ctx, "tasks/result", created.Task.TaskID, nil)
	if err != nil || !strings.Contains(string(res), "the report") {
		t.Fatalf("tasks/result = %s, %v", res, err)
	}
	got, err := c.TaskRequest(ctx, "tasks/get", created.Task.TaskID, nil)
	if err != nil || !strings.Contains(string(got), `"completed"`) {
		t.Fatalf("tasks/get = %s, %v", got, err)
	}
	_, err = c.TaskRequest(ctx, "tasks/get", "no-such-task", nil)
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32602 {
		t.Fatalf("unknown task: %v, want an RPCError -32602", err)
	}
	if _, err := c.TaskRequest(ctx, "tools/list", "x", nil); err == nil {
		t.Error("TaskRequest sent a method that is not a task method")
	}
	if _, err := c.CallTool(ctx, "report", nil, nil); err == nil {
		t.Error("a plain call of a task-required tool succeeded")
	}
}
