package taskpoller_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// nativeUpstream answers mcpbus.internal.call in place of the toolcall
// service and an upstream with native MCP tasks: each task method of a
// remote id gets the reply its script gives, and every request is kept.
type nativeUpstream struct {
	mu       sync.Mutex
	script   map[string]func(method string) bus.InternalCallReply // remote id → reply per method
	requests []bus.InternalCallRequest
}

func newNativeUpstream(t *testing.T, nc *nats.Conn, names bus.Names) *nativeUpstream {
	t.Helper()
	u := &nativeUpstream{script: map[string]func(string) bus.InternalCallReply{}}
	sub, err := nc.QueueSubscribe(names.InternalCall(), "toolcall", func(m *nats.Msg) {
		var req bus.InternalCallRequest
		_ = json.Unmarshal(m.Data, &req)
		u.mu.Lock()
		u.requests = append(u.requests, req)
		fn := u.script[req.TaskID]
		u.mu.Unlock()
		reply := bus.InternalCallReply{Content: []json.RawMessage{}, RPCError: &bus.RPCError{Code: bus.RPCCodeInvalidParams, Message: "task not found"}}
		if fn != nil {
			reply = fn(req.Method)
		}
		body, _ := json.Marshal(reply)
		_ = m.Respond(body)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	_ = nc.Flush()
	return u
}

func (u *nativeUpstream) set(remoteID string, fn func(method string) bus.InternalCallReply) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.script[remoteID] = fn
}

// methods lists the task methods sent for remoteID, in order.
func (u *nativeUpstream) methods(remoteID string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, r := range u.requests {
		if r.TaskID == remoteID {
			out = append(out, r.Method)
		}
	}
	return out
}

func taskReply(remoteID, status string, pollMS int) bus.InternalCallReply {
	b, _ := json.Marshal(map[string]any{"taskId": remoteID, "status": status, "statusMessage": "at " + status,
		"createdAt": time.Now().UTC().Format(time.RFC3339), "lastUpdatedAt": time.Now().UTC().Format(time.RFC3339),
		"ttl": 600000, "pollInterval": pollMS})
	return bus.InternalCallReply{Content: []json.RawMessage{}, Result: b}
}

// nativeHarness is a poller harness whose toolcall is a nativeUpstream.
func nativeHarness(t *testing.T, backend string) (*harness, *nativeUpstream) {
	t.Helper()
	b := testkit.StartBus(t)
	st := openStore(t, backend)
	h := &harness{t: t, bus: b, store: st, tasks: submitter{st.Tasks(), b.Names.Namespace()}, cfg: fastConfig()}
	return h, newNativeUpstream(t, b.Connect(t), b.Names)
}

// insertNative stores a native row due now, as toolcall's submit does.
func insertNative(t *testing.T, ts store.TaskStore, remoteID string, d tasks.NativeData) *store.Task {
	t.Helper()
	now := time.Now().Add(-time.Millisecond)
	d.Tool = "long_report"
	row := &store.Task{UserID: "u", ThreadID: "th", ServerName: "fake", DriverName: tasks.DriverNative,
		RemoteTaskID: remoteID, TaskName: "long_report", DriverData: d.Marshal(), NextPollAt: &now}
	if err := insertRow(ts, row); err != nil {
		t.Fatal(err)
	}
	return row
}

// TestNativeTaskFollowsTheUpstreamsPollInterval: a working task's next
// poll is the upstream's pollInterval after the poll (not the poller's
// interval), its status working; the internal call names the method, the
// task and the tool that created it.
func TestNativeTaskFollowsTheUpstreamsPollInterval(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, backend string) {
		h, up := nativeHarness(t, backend)
		up.set("r-1", func(string) bus.InternalCallReply { return taskReply("r-1", "working", 60000) })
		row := insertNative(t, h.tasks, "r-1", tasks.NativeData{})
		h.start()
		got := h.waitStatus(row.ID, store.TaskStatusWorking, 30*time.Second)
		if got.NextPollAt == nil || got.LastPolledAt == nil {
			t.Fatalf("next_poll_at %v last_polled_at %v", got.NextPollAt, got.LastPolledAt)
		}
		if d := got.NextPollAt.Sub(*got.LastPolledAt); d < 60*time.Second-time.Millisecond || d > 60*time.Second+time.Millisecond {
			t.Errorf("next poll %s after the poll, want the upstream's 60s", d)
		}
		if got := up.methods("r-1"); len(got) != 1 || got[0] != bus.MethodTasksGet {
			t.Errorf("methods = %v, want one tasks/get", got)
		}
		up.mu.Lock()
		req := up.requests[0]
		up.mu.Unlock()
		if req.Tool != "long_report" || req.Server != "fake" || req.UserID != "u" || req.ThreadID != "th" {
			t.Errorf("internal call = %+v", req)
		}
	})
}

// TestNativeTaskWhoseTTLEndedFails: a task still working after its ttl
// fails with the ttl in its error, and is never polled again.
func TestNativeTaskWhoseTTLEndedFails(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, backend string) {
		h, up := nativeHarness(t, backend)
		up.set("r-ttl", func(string) bus.InternalCallReply { return taskReply("r-ttl", "working", 10) })
		ttl, expired := int64(1000), time.Now().Add(-time.Second)
		row := insertNative(t, h.tasks, "r-ttl", tasks.NativeData{TTLMS: &ttl, ExpiresAt: &expired})
		h.start()
		got := h.waitStatus(row.ID, store.TaskStatusFailed, 30*time.Second)
		if !strings.Contains(got.Error, "did not finish within its ttl of 1s") || got.NextPollAt != nil {
			t.Errorf("error %q next_poll_at %v", got.Error, got.NextPollAt)
		}
	})
}

// TestNativeTaskTheUpstreamForgotFails: -32602 from tasks/get (the
// upstream restarted, or deleted the task) fails it as not found.
func TestNativeTaskTheUpstreamForgotFails(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, backend string) {
		h, _ := nativeHarness(t, backend)
		row := insertNative(t, h.tasks, "r-gone", tasks.NativeData{})
		h.start()
		got := h.waitStatus(row.ID, store.TaskStatusFailed, 30*time.Second)
		if got.Error != tasks.NativeNotFound {
			t.Errorf("error = %q", got.Error)
		}
	})
}

// TestNativeCancelOfAFinishedTaskStoresHowItEnded: tasks/cancel answers
// -32602 for a task that already completed; the poller then reads it
// (tasks/get, tasks/result) and stores it completed with its result,
// without the related-task _meta that names the upstream's id.
func TestNativeCancelOfAFinishedTaskStoresHowItEnded(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, backend string) {
		h, up := nativeHarness(t, backend)
		up.set("r-done", func(method string) bus.InternalCallReply {
			switch method {
			case bus.MethodTasksCancel:
				return bus.InternalCallReply{RPCError: &bus.RPCError{Code: bus.RPCCodeInvalidParams, Message: "cannot cancel task in terminal status: completed"}}
			case bus.MethodTasksResult:
				return bus.InternalCallReply{Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}],"structuredContent":{"n":1},` +
					`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"r-done"}}}`)}
			}
			return taskReply("r-done", "completed", 0)
		})
		row := insertNative(t, h.tasks, "r-done", tasks.NativeData{})
		if _, err := h.tasks.RequestCancel(t.Context(), store.RequestCancelParams{TaskID: row.ID, UserID: "u", ThreadID: "th"}); err != nil {
			t.Fatal(err)
		}
		h.start()
		got := h.waitStatus(row.ID, store.TaskStatusCompleted, 30*time.Second)
		var res map[string]json.RawMessage
		if err := json.Unmarshal(got.Result, &res); err != nil || res["content"] == nil || res["structuredContent"] == nil || res["_meta"] != nil {
			t.Errorf("result = %s (%v), want the CallToolResult without _meta", got.Result, err)
		}
		want := []string{bus.MethodTasksCancel, bus.MethodTasksGet, bus.MethodTasksResult}
		if got := up.methods("r-done"); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("methods = %v, want %v", got, want)
		}
	})
}
