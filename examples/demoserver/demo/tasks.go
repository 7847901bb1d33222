package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The task toolset speaks the DeerFlow durable-task protocol through
// structuredContent only:
//
//   - submit_report {topic, steps=3, fail, need_input} →
//     {"task_id", "status": "running"}.
//   - get_report_status {task_id} → {"task_id", "status", "progress",
//     "steps", "poll_after_seconds": 1} plus "result" {"report"} when
//     completed, "error" when failed and "input_required" {...} when the task
//     waits for answer_report. Each call on a running task advances it by one
//     step; the steps-th call ends it (completed, or failed with fail=true).
//     With need_input the first call stops at input_required until
//     answer_report is called. An unknown id gives the normal (isError false)
//     reply {"task_id", "status": "failed", "error_code": "task_not_found",
//     "error"}.
//   - cancel_report {task_id} → {"task_id", "status": "cancelled"}, or the
//     terminal status (with result or error) when the task already ended.
//     Idempotent.
//   - answer_report {task_id, answer} → resumes an input_required task and
//     returns its status reply.
//
// isError results are kept for failures of the call itself (bad arguments,
// an unreadable state file), which the protocol treats as retryable.

// Task statuses.
const (
	StatusRunning       = "running"
	StatusInputRequired = "input_required"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// ErrorCodeTaskNotFound is the error_code of a reply about an unknown task.
const ErrorCodeTaskNotFound = "task_not_found"

const (
	defaultSteps = 3
	maxSteps     = 1000
)

var taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// task is one report task, also its JSON file format.
type task struct {
	ID        string `json:"task_id"`
	Topic     string `json:"topic"`
	Steps     int    `json:"steps"`
	Fail      bool   `json:"fail,omitempty"`
	NeedInput bool   `json:"need_input,omitempty"`
	Asked     bool   `json:"asked,omitempty"`
	Answer    string `json:"answer,omitempty"`
	Progress  int    `json:"progress"`
	Status    string `json:"status"`
	Report    string `json:"report,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (t *task) terminal() bool {
	return t.Status == StatusCompleted || t.Status == StatusFailed || t.Status == StatusCancelled
}

// advance moves a running task one step forward.
func (t *task) advance() {
	if t.Status != StatusRunning {
		return
	}
	t.Progress++
	switch {
	case t.NeedInput && !t.Asked:
		t.Asked = true
		t.Status = StatusInputRequired
	case t.Progress < t.Steps:
	case t.Fail:
		t.Status = StatusFailed
		t.Error = fmt.Sprintf("report %q failed at step %d (fail requested)", t.Topic, t.Progress)
	default:
		t.Status = StatusCompleted
		t.Report = fmt.Sprintf("Report on %s: %d steps done.", t.Topic, t.Steps)
		if t.Answer != "" {
			t.Report += " Input: " + t.Answer + "."
		}
	}
}

// reportResult is the result of a completed task.
type reportResult struct {
	Report string `json:"report"`
}

// inputRequest is the input_required object.
type inputRequest struct {
	Question string `json:"question"`
	Tool     string `json:"tool"`
	Field    string `json:"field"`
}

// statusReply is the structuredContent of the status and cancel tools.
type statusReply struct {
	TaskID           string        `json:"task_id"`
	Status           string        `json:"status"`
	Result           *reportResult `json:"result,omitempty"`
	Error            string        `json:"error,omitempty"`
	ErrorCode        string        `json:"error_code,omitempty"`
	InputRequired    *inputRequest `json:"input_required,omitempty"`
	Progress         *int          `json:"progress,omitempty"`
	Steps            *int          `json:"steps,omitempty"`
	PollAfterSeconds float64       `json:"poll_after_seconds,omitempty"`
}

func (t *task) reply() statusReply {
	r := statusReply{
		TaskID:           t.ID,
		Status:           t.Status,
		Error:            t.Error,
		Progress:         &t.Progress,
		Steps:            &t.Steps,
		PollAfterSeconds: 1,
	}
	switch t.Status {
	case StatusCompleted:
		r.Result = &reportResult{Report: t.Report}
	case StatusInputRequired:
		r.InputRequired = &inputRequest{
			Question: fmt.Sprintf("Which audience is the report on %s for?", t.Topic),
			Tool:     "answer_report",
			Field:    "answer",
		}
	}
	return r
}

func notFoundReply(id string) statusReply {
	return statusReply{
		TaskID:    id,
		Status:    StatusFailed,
		ErrorCode: ErrorCodeTaskNotFound,
		Error:     fmt.Sprintf("task %q not found", id),
	}
}

// taskStore keeps tasks in memory, or as JSON files under dir when dir is set.
type taskStore struct {
	mu  sync.Mutex
	dir string
	mem map[string]*task
}

func newTaskStore(dir string) (*taskStore, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("task state dir: %w", err)
		}
	}
	return &taskStore{dir: dir, mem: map[string]*task{}}, nil
}

var errTaskNotFound = errors.New("task not found")

func (s *taskStore) load(id string) (*task, error) {
	if !taskIDPattern.MatchString(id) {
		return nil, errTaskNotFound
	}
	if s.dir == "" {
		t, ok := s.mem[id]
		if !ok {
			return nil, errTaskNotFound
		}
		cp := *t
		return &cp, nil
	}
	b, err := os.ReadFile(filepath.Join(s.dir, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errTaskNotFound
	}
	if err != nil {
		return nil, err
	}
	var t task
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("task %q: %w", id, err)
	}
	return &t, nil
}

func (s *taskStore) save(t *task) error {
	if s.dir == "" {
		cp := *t
		s.mem[t.ID] = &cp
		return nil
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, ".tmp-"+t.ID+"-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), filepath.Join(s.dir, t.ID+".json"))
}

func (s *taskStore) create(t *task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save(t)
}

// update loads the task, applies fn and saves it. It returns errTaskNotFound
// for an unknown id.
func (s *taskStore) update(id string, fn func(*task)) (*task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.load(id)
	if err != nil {
		return nil, err
	}
	fn(t)
	if err := s.save(t); err != nil {
		return nil, err
	}
	return t, nil
}

func newTaskID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "rpt-" + hex.EncodeToString(b[:])
}

func addTaskTools(s *server.MCPServer, store *taskStore, polls *PollTracker) {
	s.AddTool(mcp.NewTool("submit_report",
		mcp.WithDescription("Starts writing a report in the background and returns its task id."),
		mcp.WithString("topic", mcp.Required(), mcp.Description("What the report is about.")),
		mcp.WithInteger("steps", mcp.DefaultNumber(defaultSteps), mcp.Min(1), mcp.Max(maxSteps),
			mcp.Description("Status polls until the task ends.")),
		mcp.WithBoolean("fail", mcp.Description("End the task as failed instead of completed.")),
		mcp.WithBoolean("need_input", mcp.Description("Stop at input_required after the first step.")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		topic, err := req.RequireString("topic")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		steps := req.GetInt("steps", defaultSteps)
		if steps < 1 || steps > maxSteps {
			return mcp.NewToolResultError(fmt.Sprintf("steps must be between 1 and %d", maxSteps)), nil
		}
		t := &task{
			ID:        newTaskID(),
			Topic:     topic,
			Steps:     steps,
			Fail:      req.GetBool("fail", false),
			NeedInput: req.GetBool("need_input", false),
			Status:    StatusRunning,
		}
		if err := store.create(t); err != nil {
			return mcp.NewToolResultError("saving task: " + err.Error()), nil
		}
		return structured(map[string]string{"task_id": t.ID, "status": StatusRunning})
	})

	s.AddTool(mcp.NewTool("get_report_status",
		mcp.WithDescription("Reports a report task's status; each call advances a running task by one step."),
		mcp.WithString("task_id", mcp.Required()),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		defer polls.begin(req.GetString("task_id", ""))()
		return taskHandler(store, (*task).advance)(ctx, req)
	})

	s.AddTool(mcp.NewTool("cancel_report",
		mcp.WithDescription("Cancels a report task. Idempotent: an ended task keeps its terminal status."),
		mcp.WithString("task_id", mcp.Required()),
	), taskHandler(store, func(t *task) {
		if !t.terminal() {
			t.Status = StatusCancelled
		}
	}))

	s.AddTool(mcp.NewTool("answer_report",
		mcp.WithDescription("Answers the question of a task in input_required and resumes it."),
		mcp.WithString("task_id", mcp.Required()),
		mcp.WithString("answer", mcp.Required()),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		answer, err := req.RequireString("answer")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return taskHandler(store, func(t *task) {
			if t.Status == StatusInputRequired {
				t.Answer = answer
				t.Status = StatusRunning
			}
		})(ctx, req)
	})
}

// taskHandler returns a tool handler that applies fn to the task named by the
// task_id argument and replies with the task's status.
func taskHandler(store *taskStore, fn func(*task)) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, err := req.RequireString("task_id")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		t, err := store.update(id, fn)
		if errors.Is(err, errTaskNotFound) {
			return structured(notFoundReply(id))
		}
		if err != nil {
			return mcp.NewToolResultError("task store: " + err.Error()), nil
		}
		return structured(t.reply())
	}
}

// structured returns v as structuredContent with its JSON as the text fallback.
func structured(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultStructured(json.RawMessage(b), string(b)), nil
}
