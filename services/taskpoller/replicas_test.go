package taskpoller_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func TestTwoReplicasNeverPollOneTaskAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.cfg.MaxConcurrentPolls = 4
		const n, steps = 40, 2
		rows := make(map[string]string, n) // row id → remote id
		for i := range n {
			rid := h.fake.submit(map[string]any{"topic": fmt.Sprint("t", i), "steps": steps})
			rows[insertTask(t, h.tasks, "u", "th", rid, reportTools).ID] = rid
		}
		a, b := h.start(), h.start()
		if a.svc.LeaseOwner() == b.svc.LeaseOwner() {
			t.Fatal("two replicas share a lease owner")
		}
		for id := range rows {
			h.waitStatus(id, store.TaskStatusCompleted, 30*time.Second)
		}
		h.fake.mu.Lock()
		overlaps := h.fake.overlaps
		h.fake.mu.Unlock()
		if overlaps != 0 {
			t.Fatalf("%d status calls overlapped another call for the same task", overlaps)
		}
		for id, rid := range rows {
			if c := h.fake.count("get_report_status", rid); c != steps {
				t.Fatalf("task %s: %d status calls, want %d", id, c, steps)
			}
		}
	})
}

func TestRestartRecovery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		const n, steps = 6, 3
		var ids []string
		rids := map[string]string{}
		for i := range n {
			rid := h.fake.submit(map[string]any{"topic": fmt.Sprint("r", i), "steps": steps})
			id := insertTask(t, h.tasks, "u", "th", rid, reportTools).ID
			ids = append(ids, id)
			rids[id] = rid
		}
		// Hold one status call so the first replica stops mid-call.
		held := rids[ids[0]]
		started, release := h.fake.hold(held)
		first := h.start()
		testkit.Receive(t, 30*time.Second, "the held status call", started)
		testkit.Eventually(t, 10*time.Second, "the others to start working", func() bool {
			return h.get(ids[1]).Status == store.TaskStatusWorking
		})
		first.stop(t) // cancels the hung call and releases its lease
		release()
		if row := h.get(ids[0]); row.LeaseOwner != "" || row.Status != store.TaskStatusSubmitted {
			t.Fatalf("stopped replica left the row leased or changed: %+v", row)
		}
		h.start(func(c *taskpoller.Config, _ *taskpoller.Deps) { c.LeaseOwner = "second-replica" })
		for _, id := range ids {
			row := h.waitStatus(id, store.TaskStatusCompleted, 20*time.Second)
			if row.CompletedAt == nil {
				t.Fatalf("row %+v", row)
			}
		}
	})
}
