package demo_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

func connect(t *testing.T, s *server.MCPServer) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.ProtocolVersion20251125,
		ClientInfo:      mcp.Implementation{Name: "test", Version: "0"},
	}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// status is the union of the task tools' structured replies.
type status struct {
	TaskID           string          `json:"task_id"`
	Status           string          `json:"status"`
	Result           json.RawMessage `json:"result"`
	Error            string          `json:"error"`
	ErrorCode        string          `json:"error_code"`
	InputRequired    json.RawMessage `json:"input_required"`
	PollAfterSeconds float64         `json:"poll_after_seconds"`
}

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func callTask(t *testing.T, c *client.Client, name string, args map[string]any) status {
	t.Helper()
	res := callTool(t, c, name, args)
	if res.IsError {
		t.Fatalf("%s: isError: %+v", name, res.Content)
	}
	var st status
	if err := json.Unmarshal(res.RawStructuredContent, &st); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, res.RawStructuredContent, err)
	}
	return st
}

func submit(t *testing.T, c *client.Client, args map[string]any) string {
	t.Helper()
	st := callTask(t, c, "submit_report", args)
	if st.Status != demo.StatusRunning || st.TaskID == "" {
		t.Fatalf("submit = %+v", st)
	}
	return st.TaskID
}

func poll(t *testing.T, c *client.Client, id string) status {
	t.Helper()
	st := callTask(t, c, "get_report_status", map[string]any{"task_id": id})
	if st.TaskID != id {
		t.Fatalf("status reply task_id = %q, want %q", st.TaskID, id)
	}
	return st
}

func TestTaskCompletesAfterSteps(t *testing.T) {
	t.Parallel()
	c := connect(t, demo.NewServer())
	id := submit(t, c, map[string]any{"topic": "otters", "steps": 3})
	for i := 1; i < 3; i++ {
		if st := poll(t, c, id); st.Status != demo.StatusRunning || st.PollAfterSeconds != 1 {
			t.Fatalf("poll %d = %+v", i, st)
		}
	}
	st := poll(t, c, id)
	if st.Status != demo.StatusCompleted || string(st.Result) != `{"report":"Report on otters: 3 steps done."}` {
		t.Fatalf("final poll = %+v (result %s)", st, st.Result)
	}
	// Terminal states are stable, and cancel reports them.
	if st := poll(t, c, id); st.Status != demo.StatusCompleted {
		t.Errorf("poll after completion = %+v", st)
	}
	if st := callTask(t, c, "cancel_report", map[string]any{"task_id": id}); st.Status != demo.StatusCompleted || st.Result == nil {
		t.Errorf("cancel after completion = %+v", st)
	}
}

func TestTaskFails(t *testing.T) {
	t.Parallel()
	c := connect(t, demo.NewServer())
	id := submit(t, c, map[string]any{"topic": "x", "steps": 1, "fail": true})
	if st := poll(t, c, id); st.Status != demo.StatusFailed || st.Error == "" || st.ErrorCode != "" {
		t.Fatalf("poll = %+v", st)
	}
}

func TestTaskInputRequired(t *testing.T) {
	t.Parallel()
	c := connect(t, demo.NewServer())
	id := submit(t, c, map[string]any{"topic": "y", "steps": 2, "need_input": true})
	for range 2 {
		if st := poll(t, c, id); st.Status != demo.StatusInputRequired || st.InputRequired == nil {
			t.Fatalf("poll = %+v", st)
		}
	}
	if st := callTask(t, c, "answer_report", map[string]any{"task_id": id, "answer": "engineers"}); st.Status != demo.StatusRunning {
		t.Fatalf("answer = %+v", st)
	}
	st := poll(t, c, id)
	if st.Status != demo.StatusCompleted || string(st.Result) != `{"report":"Report on y: 2 steps done. Input: engineers."}` {
		t.Fatalf("poll after answer = %+v (result %s)", st, st.Result)
	}
}

func TestTaskCancelIsIdempotent(t *testing.T) {
	t.Parallel()
	c := connect(t, demo.NewServer())
	id := submit(t, c, map[string]any{"topic": "z"})
	for range 2 {
		if st := callTask(t, c, "cancel_report", map[string]any{"task_id": id}); st.Status != demo.StatusCancelled || st.TaskID != id {
			t.Fatalf("cancel = %+v", st)
		}
	}
	if st := poll(t, c, id); st.Status != demo.StatusCancelled {
		t.Errorf("poll after cancel = %+v", st)
	}
}

func TestTaskNotFound(t *testing.T) {
	t.Parallel()
	c := connect(t, demo.NewServer())
	for _, tool := range []string{"get_report_status", "cancel_report"} {
		for _, id := range []string{"rpt-nope", "../../etc/passwd"} {
			st := callTask(t, c, tool, map[string]any{"task_id": id})
			if st.Status != demo.StatusFailed || st.ErrorCode != demo.ErrorCodeTaskNotFound || st.TaskID != id || st.Error == "" {
				t.Errorf("%s(%q) = %+v", tool, id, st)
			}
		}
	}
}

func TestTasksSurviveRestartWithStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1, err := demo.New(demo.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c1 := connect(t, s1)
	id := submit(t, c1, map[string]any{"topic": "durable", "steps": 2})
	if st := poll(t, c1, id); st.Status != demo.StatusRunning {
		t.Fatalf("poll = %+v", st)
	}

	s2, err := demo.New(demo.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c2 := connect(t, s2)
	if st := poll(t, c2, id); st.Status != demo.StatusCompleted {
		t.Fatalf("poll on the restarted server = %+v", st)
	}
}

func TestBasicTools(t *testing.T) {
	t.Parallel()
	c := connect(t, demo.NewServer())
	if res := callTool(t, c, "add", map[string]any{"a": 2, "b": 3.5}); string(res.RawStructuredContent) != `{"sum":5.5}` {
		t.Errorf("add = %s", res.RawStructuredContent)
	}
	if res := callTool(t, c, "fail", map[string]any{"message": "nope"}); !res.IsError {
		t.Errorf("fail is not an error: %+v", res)
	}
	if res := callTool(t, c, "slow", map[string]any{"seconds": 500}); !res.IsError {
		t.Errorf("slow 500 is not an error: %+v", res)
	}
	if res := callTool(t, c, "weather", map[string]any{"city": "Rome"}); string(res.RawStructuredContent) != `{"city":"Rome","temperature_c":21,"conditions":"sunny"}` {
		t.Errorf("weather = %s", res.RawStructuredContent)
	}
}
