package taskpoller_test

import (
	"context"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// addScriptedTools adds task tools with scripted misbehaviour to the demo
// server; each keeps a call counter per task id.
func addScriptedTools(s *server.MCPServer) {
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	next := func(tool, id string) int {
		mu.Lock()
		defer mu.Unlock()
		calls[tool+" "+id]++
		return calls[tool+" "+id]
	}
	add := func(name string, fn func(id string, n int) *mcp.CallToolResult) {
		s.AddTool(mcp.NewTool(name, mcp.WithString("task_id", mcp.Required())),
			func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				id := req.GetString("task_id", "")
				return fn(id, next(name, id)), nil
			})
	}
	structured := func(v map[string]any) *mcp.CallToolResult { return mcp.NewToolResultStructured(v, "structured") }
	// flaky_status fails (isError) for the first errorsBefore calls, then
	// completes; errorsBefore is 3, or 1000 for ids starting "down".
	add("flaky_status", func(id string, n int) *mcp.CallToolResult {
		errorsBefore := 3
		if strings.HasPrefix(id, "down") {
			errorsBefore = 1000
		}
		if n <= errorsBefore {
			return mcp.NewToolResultError("  upstream overloaded, try later \n")
		}
		return structured(map[string]any{"task_id": id, "status": "completed", "result": map[string]any{"ok": true}})
	})
	add("text_status", func(id string, _ int) *mcp.CallToolResult {
		return mcp.NewToolResultText(`{"task_id":"` + id + `","status":"completed"}`)
	})
	add("mismatch_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": "someone-else", "status": "running"})
	})
	add("bad_poll_after_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": id, "status": "running", "poll_after_seconds": -1})
	})
	add("no_input_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": id, "status": "input_required"})
	})
	add("huge_input_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": id, "status": "input_required",
			"input_required": map[string]any{"question": strings.Repeat("?", 70000)}})
	})
	add("big_result_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": id, "status": "completed",
			"result":          "BEGIN" + strings.Repeat("x", 5000),
			"result_artifact": map[string]any{"uri": "s3://reports/" + id, "mime_type": "text/plain"}})
	})
	add("slow_input_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": id, "status": "input_required", "poll_after_seconds": 1,
			"input_required": map[string]any{"question": "which audience?"}})
	})
	// flaky_cancel fails twice, then cancels.
	add("flaky_cancel", func(id string, n int) *mcp.CallToolResult {
		if n <= 2 {
			return mcp.NewToolResultError("cancel backend busy")
		}
		return structured(map[string]any{"task_id": id, "status": "cancelled"})
	})
	// running_cancel answers a non-terminal status once, then cancels.
	add("running_cancel", func(id string, n int) *mcp.CallToolResult {
		if n == 1 {
			return structured(map[string]any{"task_id": id, "status": "running"})
		}
		return structured(map[string]any{"task_id": id, "status": "cancelled"})
	})
	// never_status stays running (a task that only a cancel ends).
	add("never_status", func(id string, _ int) *mcp.CallToolResult {
		return structured(map[string]any{"task_id": id, "status": "running", "poll_after_seconds": 3600})
	})
}
