package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Research is the demo's tool with native tasks in the 2026-07-28 tasks
// extension (io.modelcontextprotocol/tasks), written by hand (mcp-go
// speaks only 2025-11-25's tasks). mcp-go serves the tool itself, listed
// with execution.taskSupport "optional": a call that does not declare the
// extension runs at once. [Research.Wrap] (streamable HTTP) and
// [Research.WrapStdio] answer a 2026-07-28 tools/call of research that
// declares the extension with a CreateTaskResult (resultType "task"), and
// the extension's tasks/get, tasks/update and tasks/cancel; everything
// else goes to mcp-go.
//
//   - research {topic, steps?, fail?}: the task advances one step per
//     tasks/get and completes after steps of them (default 2, at most
//     1000) with {"topic", "sources": steps} as structuredContent, or with
//     an isError result when fail is true. tasks/get of a terminal task
//     inlines the result.
//   - deep_research: research listed with taskSupport "required" (a plain
//     call is an error result).
//   - tasks/cancel: a task that is not terminal is cancelled at once.
//   - research_stats: {"created", "gets", "cancelled"} counts of the
//     extension's requests, so tests can see what reached the server.
type Research struct {
	mu    sync.Mutex
	tasks map[string]*researchTask
	stats ResearchStats
}

// ResearchStats counts the extension's requests.
type ResearchStats struct {
	Created   int `json:"created"`
	Gets      int `json:"gets"`
	Cancelled int `json:"cancelled"`
}

type researchTask struct {
	id, topic       string
	steps, done     int
	fail            bool
	status          string
	created, update time.Time
}

// researchPollMS is the pollIntervalMs the tasks report.
const researchPollMS = 500

// researchTTLMS is the tasks' ttlMs.
const researchTTLMS = 3600000

// NewResearch returns an empty research task store.
func NewResearch() *Research { return &Research{tasks: map[string]*researchTask{}} }

type researchArgs struct {
	Topic string `json:"topic"`
	Steps int    `json:"steps"`
	Fail  bool   `json:"fail"`
}

func (a researchArgs) normalized() researchArgs {
	if a.Steps <= 0 {
		a.Steps = 2
	}
	a.Steps = min(a.Steps, 1000)
	return a
}

// researchResult is the CallToolResult of research on a.
func researchResult(a researchArgs) map[string]any {
	if a.Fail {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "research on " + a.Topic + " failed: no sources"}}, "isError": true}
	}
	sc := map[string]any{"topic": a.Topic, "sources": a.Steps}
	text, _ := json.Marshal(sc)
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}, "structuredContent": sc, "isError": false}
}

// AddTools registers research (its plain, immediate form) and
// research_stats on s.
func (r *Research) AddTools(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("research", mcp.WithDescription("Research a topic; a long-running task for clients of the 2026-07-28 tasks extension"),
		mcp.WithString("topic", mcp.Required()), mcp.WithNumber("steps"), mcp.WithBoolean("fail"),
		mcp.WithTaskSupport(mcp.TaskSupportOptional)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a := researchArgs{Topic: req.GetString("topic", ""), Steps: req.GetInt("steps", 0), Fail: req.GetBool("fail", false)}.normalized()
			raw, _ := json.Marshal(researchResult(a))
			var res mcp.CallToolResult
			if err := json.Unmarshal(raw, &res); err != nil {
				return nil, err
			}
			return &res, nil
		})
	// deep_research runs only as a task: mcp-go refuses a plain call.
	s.AddTool(mcp.NewTool("deep_research", mcp.WithDescription("Research a topic, only as a task of the 2026-07-28 tasks extension"),
		mcp.WithString("topic", mcp.Required()), mcp.WithNumber("steps"), mcp.WithBoolean("fail"),
		mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("deep_research runs only as a task"), nil
		})
	s.AddTool(mcp.NewTool("research_stats", mcp.WithDescription("Counts of the research tasks extension's requests")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return mcp.NewToolResultStructuredOnly(r.stats), nil
		})
}

// Stats returns the counts so far.
func (r *Research) Stats() ResearchStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// extensionRequest is the part of a JSON-RPC request Wrap reads.
type extensionRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		Meta      struct {
			ProtocolVersion    string `json:"io.modelcontextprotocol/protocolVersion"`
			ClientCapabilities struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	} `json:"params"`
}

const tasksExtension = "io.modelcontextprotocol/tasks"

// Wrap answers the extension's requests itself and passes the rest to
// next.
func (r *Research) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read body", http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, ok := r.answer(body)
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
	})
}

// WrapStdio is Wrap for the stdio transport: it returns the input the
// server reads (in without the lines answered here) and the output it
// writes (out, one message per Write, shared with the answers).
func (r *Research) WrapStdio(in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	lw := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if resp, ok := r.answer(line); ok {
				if _, err := lw.Write(resp); err != nil {
					pw.CloseWithError(err)
					return
				}
				continue
			}
			if _, err := pw.Write(append(line, '\n')); err != nil {
				return
			}
		}
		pw.CloseWithError(sc.Err())
	}()
	return pr, lw
}

// lockedWriter serializes whole writes (mcp-go writes a message in one).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// answer is the response (one JSON line) to a request the extension
// answers; ok is false for anything else.
func (r *Research) answer(body []byte) ([]byte, bool) {
	var m extensionRequest
	if json.Unmarshal(body, &m) != nil || m.Params.Meta.ProtocolVersion != mcp.ProtocolVersion20260728 {
		return nil, false
	}
	_, declared := m.Params.Meta.ClientCapabilities.Extensions[tasksExtension]
	var result any
	var rpcErr map[string]any
	switch {
	case m.Method == "tools/call" && (m.Params.Name == "research" || m.Params.Name == "deep_research") && declared:
		result, rpcErr = r.create(m.Params.Arguments)
	case m.Method == "tasks/get" || m.Method == "tasks/update" || m.Method == "tasks/cancel":
		if !declared {
			rpcErr = map[string]any{"code": -32021, "message": "Missing required client capability",
				"data": map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}}
			break
		}
		result, rpcErr = r.taskMethod(m.Method, m.Params.TaskID)
	default:
		return nil, false
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if rpcErr != nil {
		resp["error"] = rpcErr
	} else {
		resp["result"] = result
	}
	b, _ := json.Marshal(resp)
	return append(b, '\n'), true
}

func (r *Research) create(args json.RawMessage) (any, map[string]any) {
	var a researchArgs
	if len(args) > 0 && json.Unmarshal(args, &a) != nil {
		return nil, map[string]any{"code": -32602, "message": "research: arguments must be an object"}
	}
	a = a.normalized()
	var b [16]byte
	_, _ = rand.Read(b[:])
	now := time.Now().UTC()
	t := &researchTask{id: hex.EncodeToString(b[:]), topic: a.Topic, steps: a.Steps, fail: a.Fail, status: "working", created: now, update: now}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tasks[t.id] = t
	r.stats.Created++
	out := t.view()
	out["resultType"] = "task"
	return out, nil
}

func (r *Research) taskMethod(method, id string) (any, map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tasks[id]
	if !ok {
		return nil, map[string]any{"code": -32602, "message": "Failed to retrieve task: Task not found"}
	}
	ack := map[string]any{"resultType": "complete"}
	switch method {
	case "tasks/update":
		return ack, nil
	case "tasks/cancel":
		if t.status == "working" {
			t.status, t.update = "cancelled", time.Now().UTC()
			r.stats.Cancelled++
		}
		return ack, nil
	}
	r.stats.Gets++
	if t.status == "working" {
		t.done++
		t.update = time.Now().UTC()
		if t.done >= t.steps {
			t.status = "completed"
		}
	}
	out := t.view()
	out["resultType"] = "complete"
	if t.status == "completed" {
		out["result"] = researchResult(researchArgs{Topic: t.topic, Steps: t.steps, Fail: t.fail})
	}
	return out, nil
}

// view is the task's Task object.
func (t *researchTask) view() map[string]any {
	v := map[string]any{"taskId": t.id, "status": t.status, "createdAt": t.created.Format(time.RFC3339Nano),
		"lastUpdatedAt": t.update.Format(time.RFC3339Nano), "ttlMs": researchTTLMS}
	if t.status == "working" {
		v["pollIntervalMs"] = researchPollMS
		v["statusMessage"] = fmt.Sprintf("step %d of %d", t.done, t.steps)
	}
	return v
}

// TasksExtensionOption advertises the tasks extension in server/discover.
func TasksExtensionOption() server.ServerOption {
	return server.WithExtensions(map[string]any{tasksExtension: map[string]any{}})
}

// NewModernResearchHandler returns the demo server as `demoserver
// -transport http -era modern` serves it (2026-07-28 only, research
// included, the tasks extension advertised and served), as the handler of
// its /mcp endpoint, for in-process tests; and its Research.
func NewModernResearchHandler() (http.Handler, *Research, error) {
	opts, versions, err := EraOptions(EraModern)
	if err != nil {
		return nil, nil, err
	}
	r := NewResearch()
	opts = append(opts, TasksExtensionOption())
	s, err := New(Config{ServerOptions: opts, Research: r})
	if err != nil {
		return nil, nil, err
	}
	return r.Wrap(server.NewStreamableHTTPServer(s, server.WithStateful(true), server.WithStreamableHTTPProtocolVersions(versions...))), r, nil
}
