package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/postgres"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// pollerTasks is how many tasks the multi-process test drives (the issue's
// 1,000) and pollerSteps the status calls each needs.
const (
	pollerTasks = 1000
	pollerSteps = 3
)

// fakeTaskServer answers mcpbus.internal.call in place of the toolcall
// service and a remote task server: each status call advances a task one
// step until it completes. It counts calls per task, notices overlapping
// calls for one task, and can hold every call (to freeze replicas mid-lease).
type fakeTaskServer struct {
	mu            sync.Mutex
	progress      map[string]int // remote id → steps done
	calls         map[string]int // remote id → status calls
	afterTerminal map[string]int // remote id → calls on a completed task
	inflight      map[string]bool
	overlaps      int
	byReplica     map[string]int // reply inbox prefix → calls
	holding       bool
	held          map[string][]string // reply prefix → remote ids of held calls
	release       chan struct{}
	total         int
}

func newFakeTaskServer() *fakeTaskServer {
	return &fakeTaskServer{progress: map[string]int{}, calls: map[string]int{}, afterTerminal: map[string]int{},
		inflight: map[string]bool{}, byReplica: map[string]int{}, held: map[string][]string{}, release: make(chan struct{})}
}

// replicaOf is the requester's inbox prefix: one per poller connection.
func replicaOf(reply string) string { return reply[:strings.LastIndexByte(reply, '.')] }

func (f *fakeTaskServer) serve(m *nats.Msg) {
	var req bus.InternalCallRequest
	_ = json.Unmarshal(m.Data, &req)
	var args struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	rid, replica := args.TaskID, replicaOf(m.Reply)
	f.mu.Lock()
	if f.inflight[rid] {
		f.overlaps++
	}
	f.inflight[rid] = true
	f.total++
	f.byReplica[replica]++
	hold := f.holding
	if hold {
		f.held[replica] = append(f.held[replica], rid)
	}
	release := f.release
	f.mu.Unlock()
	if hold {
		<-release
	}
	f.mu.Lock()
	f.calls[rid]++
	if f.progress[rid] >= pollerSteps {
		f.afterTerminal[rid]++
	} else {
		f.progress[rid]++
	}
	status := "running"
	var result any
	if f.progress[rid] >= pollerSteps {
		status, result = "completed", map[string]any{"report": "done " + rid}
	}
	delete(f.inflight, rid)
	f.mu.Unlock()
	body, _ := json.Marshal(bus.InternalCallReply{
		StructuredContent: mustJSON(map[string]any{"task_id": rid, "status": status, "result": result}),
		Content:           []json.RawMessage{json.RawMessage(`{"type":"text","text":"status"}`)},
	})
	_ = m.Respond(body)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func taskpollerInstances(t *testing.T, nc *nats.Conn, names bus.Names) int {
	t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subj, _ := micro.ControlSubject(micro.PingVerb, names.Service(bus.ServiceTaskpoller), "")
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
			return n
		}
		n++
	}
}

// TestThreeTaskPollerProcesses runs three `mcpbus serve taskpoller`
// processes on one NATS and one PostgreSQL with 1,000 tasks of three steps.
// Midway every status call is held until each replica has calls in flight
// under its leases; one replica is then killed (SIGKILL) and the calls are
// released. The survivors take over the dead replica's rows once their
// 5-second leases expire: every task completes, no two status calls for one
// task ever overlap, and the fake's call counts match the steps (plus one
// repeated call for a task whose completing answer went to the dead
// replica).
func TestThreeTaskPollerProcesses(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	dbURL := testSchema(t)
	ctx := context.Background()
	if _, err := postgres.Migrate(ctx, dbURL, observability.Discard()); err != nil {
		t.Fatal(err)
	}
	st, err := postgres.Open(ctx, dbURL, observability.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt := st.Tasks()

	fake := newFakeTaskServer()
	responder := b.Connect(t)
	if _, err := responder.QueueSubscribe(b.Names.InternalCall(), "toolcall", func(m *nats.Msg) { go fake.serve(m) }); err != nil {
		t.Fatal(err)
	}
	_ = responder.Flush()

	dir := t.TempDir()
	settings := natsSettings(b.URL, b.Names) + fmt.Sprintf("database:\n  backend: postgres\n  url: %q\nmcp_tasks:\n  enabled: true\n"+
		"  poll_interval_seconds: 1\n  lease_seconds: 5\n  max_concurrent_polls: 64\nlog:\n  level: warn\n", dbURL)
	ext := `{"mcpServers": {"reports": {"type": "http", "url": "http://127.0.0.1:1/mcp", "tool_call_timeout": 4,
		"task_toolsets": [{"name": "reports", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}}}`
	for name, content := range map[string]string{"config.yaml": settings, "extensions_config.json": ext} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var procs []*process
	for i := range 3 {
		p := &process{name: fmt.Sprint("taskpoller-", i), cmd: exec.Command(mcpbusBin, "serve", "taskpoller"), out: &testkit.SyncBuffer{}}
		p.cmd.Dir = dir
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		p.cmd.Env = append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_NATS_NAMESPACE=", "MCPBUS_DATABASE_URL=", "MCPBUS_CONFIG=", "MCPBUS_EXTENSIONS_CONFIG=")
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
			if t.Failed() {
				t.Logf("--- output of %s ---\n%s", p.name, p.out.String())
			}
		})
		procs = append(procs, p)
	}
	testkit.Eventually(t, 60*time.Second, "three taskpoller replicas", func() bool { return taskpollerInstances(t, b.NC, b.Names) == 3 })

	dd := tasks.DriverData{Toolset: "reports", SubmitTool: "submit_report", StatusTool: "get_report_status", CancelTool: "cancel_report"}.Marshal()
	rows := map[string]string{} // row id → remote id
	now := time.Now()
	for i := range pollerTasks {
		rid := fmt.Sprintf("remote-%04d", i)
		row := &store.Task{UserID: "u", ThreadID: fmt.Sprint("th-", i%10), ServerName: "reports", DriverName: tasks.DriverStructured,
			RemoteTaskID: rid, TaskName: "report", DriverData: dd, NextPollAt: &now, Namespace: b.Names.Namespace()}
		stored, err := rt.InsertTask(ctx, store.InsertTaskParams{Task: *row})
		if err != nil {
			t.Fatal(err)
		}
		rows[stored.ID] = rid
	}
	start := time.Now()

	// Midway: hold every call until all three replicas have calls in flight.
	// (After two rounds, so the held calls are mostly completing ones.)
	testkit.Eventually(t, 60*time.Second, "two thirds of the status calls", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		if fake.total >= 2*pollerTasks+pollerTasks/10 {
			fake.holding = true
			return true
		}
		return false
	})
	testkit.Eventually(t, 30*time.Second, "every replica to hold calls in flight", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.held) == 3
	})
	var leasedAtKill int
	_ = st.Pool().QueryRow(ctx, "SELECT count(*) FROM mcp_tasks WHERE lease_expires_at > now()").Scan(&leasedAtKill)
	victim := procs[0]
	_ = victim.cmd.Process.Kill()
	_ = victim.cmd.Wait()
	fake.mu.Lock()
	heldBefore := map[string][]string{}
	callsAtRelease := map[string]int{}
	for k, v := range fake.held {
		heldBefore[k] = v
		callsAtRelease[k] = fake.byReplica[k]
	}
	fake.holding = false
	close(fake.release)
	fake.mu.Unlock()
	if leasedAtKill == 0 {
		t.Fatal("no row was leased when the replica was killed")
	}

	testkit.Eventually(t, 90*time.Second, "every task to complete", func() bool {
		var open int
		_ = st.Pool().QueryRow(ctx, "SELECT count(*) FROM mcp_tasks WHERE status <> 'completed'").Scan(&open)
		return open == 0
	})
	elapsed := time.Since(start)

	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.overlaps != 0 {
		t.Fatalf("%d status calls overlapped another call for the same task", fake.overlaps)
	}
	// The victim is the replica that held calls and never called again.
	var victimReplica string // the replica that made no call after the release
	for replica := range heldBefore {
		if fake.byReplica[replica] == callsAtRelease[replica] {
			victimReplica = replica
		}
	}
	if victimReplica == "" {
		t.Fatal("every replica kept calling after one was killed")
	}
	lost := map[string]bool{}
	for _, rid := range heldBefore[victimReplica] {
		lost[rid] = true
	}
	var repeated, attempts int
	for id, rid := range rows {
		if got := fake.calls[rid] - fake.afterTerminal[rid]; got != pollerSteps {
			t.Fatalf("task %s: %d advancing status calls, want %d", id, got, pollerSteps)
		}
		if n := fake.afterTerminal[rid]; n > 0 {
			if n > 1 || !lost[rid] {
				t.Fatalf("task %s: %d calls after completion (lost to the dead replica: %v)", id, n, lost[rid])
			}
			repeated++
		}
	}
	if repeated > len(lost) {
		t.Fatalf("%d tasks repeated a call, but only %d answers went to the dead replica", repeated, len(lost))
	}
	_ = st.Pool().QueryRow(ctx, "SELECT sum(poll_attempt_count) FROM mcp_tasks").Scan(&attempts)
	if attempts < fake.total {
		t.Fatalf("%d poll claims for %d status calls", attempts, fake.total)
	}
	t.Logf("%d tasks × %d steps on 3 poller processes (one killed with %d leased rows, %d calls in flight): "+
		"%d status calls, %d repeated after a lost answer, %d poll claims, done in %s",
		pollerTasks, pollerSteps, leasedAtKill, len(heldBefore[victimReplica]), fake.total, repeated, attempts, elapsed.Round(time.Millisecond))
}
