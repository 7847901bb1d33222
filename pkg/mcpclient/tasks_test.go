package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
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

// TestModernTaskMethods: against the demo's 2026-07-28 research tool, the
// same calls speak the tasks extension: CallToolTask declares it and gets
// the flat CreateTaskResult, tasks/get follows the task (Mcp-Name is the
// task id, or the demo's own handler would not have answered), tasks/result
// is the result tasks/get inlines, tasks/cancel is acknowledged and
// answered with the task (cancelled), an unknown task is an RPCError
// -32602; a call of the plain tool answers at once.
func TestModernTaskMethods(t *testing.T) {
	t.Parallel()
	h, research, err := demo.NewModernResearchHandler()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var mu sync.Mutex
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Mcp-Method"), "tasks/") {
			mu.Lock()
			names = append(names, r.Header.Get("Mcp-Name"))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := connect(t, mcpclient.Spec{Server: "research", Transport: "http", URL: ts.URL + "/mcp"})
	if c.ServerInfo().Era != mcpclient.EraModern {
		t.Fatalf("era = %q, want modern", c.ServerInfo().Era)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, err := c.CallToolTask(ctx, "research", json.RawMessage(`{"topic":"tides","steps":2}`), nil, time.Minute)
	if err != nil || !mcpclient.IsCreateTask(raw) {
		t.Fatalf("CallToolTask = %s, %v", raw, err)
	}
	var created struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		TTLMS      int64  `json:"ttlMs"`
	}
	if err := json.Unmarshal(raw, &created); err != nil || created.ResultType != "task" || created.TaskID == "" || created.TTLMS == 0 {
		t.Fatalf("CreateTaskResult = %s (%v)", raw, err)
	}
	got, err := c.TaskRequest(ctx, "tasks/get", created.TaskID, nil)
	if err != nil || !strings.Contains(string(got), `"working"`) {
		t.Fatalf("tasks/get = %s, %v", got, err)
	}
	res, err := c.TaskRequest(ctx, "tasks/result", created.TaskID, nil)
	if err != nil || !strings.Contains(string(res), `"sources":2`) || strings.Contains(string(res), "taskId") {
		t.Fatalf("tasks/result = %s, %v", res, err)
	}
	long, err := c.CallToolTask(ctx, "research", json.RawMessage(`{"topic":"long","steps":1000}`), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var longTask struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(long, &longTask)
	cancelled, err := c.TaskRequest(ctx, "tasks/cancel", longTask.TaskID, nil)
	if err != nil || !strings.Contains(string(cancelled), `"cancelled"`) || research.Stats().Cancelled != 1 {
		t.Fatalf("tasks/cancel = %s, %v (stats %+v)", cancelled, err, research.Stats())
	}
	_, err = c.TaskRequest(ctx, "tasks/get", "no-such-task", nil)
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32602 {
		t.Fatalf("unknown task: %v, want an RPCError -32602", err)
	}
	now, err := c.CallToolTask(ctx, "echo", json.RawMessage(`{"message":"hi"}`), nil, 0)
	if err != nil || mcpclient.IsCreateTask(now) {
		t.Fatalf("a tool that makes no task: %s, %v", now, err)
	}
	if out, err := mcpclient.ParseCallResult(now); err != nil || len(out.Content) != 1 || out.Meta != nil {
		t.Errorf("ParseCallResult = %+v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range names {
		if n == "" {
			t.Errorf("a task method without Mcp-Name: %q", names)
		}
	}
}
