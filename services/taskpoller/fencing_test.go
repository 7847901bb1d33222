package taskpoller_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

// A status call is bounded by the lease it was claimed under: its
// requester gives up (and toolcall, told by Mcpbus-Timeout-Ms, stops the
// upstream request) before the lease expires in the database, so no call
// of this poller is still on its way when another replica may claim the
// row. Here the upstream holds the call; the lease is the only bound.
func TestStatusCallEndsBeforeItsLeaseExpires(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.cfg.Lease = 2 * time.Second
		rid := h.fake.submit(map[string]any{"topic": "fence", "steps": 1})
		started, release := h.fake.hold(rid)
		defer release()
		row := insertTask(t, h.tasks, "u", "th", rid, reportTools)
		h.start()
		testkit.Receive(t, 30*time.Second, "the held status call", started)
		leased := h.get(row.ID)
		if leased.LeaseExpiresAt == nil {
			t.Fatal("the row being polled has no lease")
		}
		h.fake.mu.Lock()
		deadlines := append([]time.Time(nil), h.fake.deadlines[rid]...)
		h.fake.mu.Unlock()
		if len(deadlines) != 1 {
			t.Fatalf("%d status calls recorded, want 1", len(deadlines))
		}
		if !deadlines[0].Before(*leased.LeaseExpiresAt) {
			t.Fatalf("the status call may run until %s, past its lease (expires %s): another replica could poll meanwhile",
				deadlines[0].Format(time.StampMilli), leased.LeaseExpiresAt.Format(time.StampMilli))
		}
	})
}

// lateClaims is a task store whose first poll claim returns only once
// another replica has taken the claimed rows over: a poller cut off from
// the database (or stalled) after its claim, not dead.
type lateClaims struct {
	store.TaskStore
	once chan struct{} // closed by the first claim
}

func (l lateClaims) ClaimDuePolls(ctx context.Context, p store.ClaimParams) ([]store.Task, error) {
	rows, err := l.TaskStore.ClaimDuePolls(ctx, p)
	select {
	case <-l.once:
		return rows, err
	default:
	}
	if err != nil || len(rows) == 0 {
		return rows, err
	}
	close(l.once)
	// Until the row is no longer this poller's (another claimed it, or
	// polled it to its end): a condition on the database, polled.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		row, gerr := l.TaskStore.GetTask(ctx, store.GetTaskParams{ID: rows[0].ID})
		if gerr == nil && row.LeaseOwner != p.Owner {
			return rows, err
		}
		select {
		case <-ctx.Done():
			return rows, err
		case <-tick.C:
		}
	}
}

// Two pollers: the first claims a task, then stalls (it keeps running)
// until its lease has moved to the second, which polls the task to its
// end. The first must not poll with the lease it lost: the upstream sees
// exactly the second's status calls.
func TestPollerThatLostItsLeaseDoesNotPoll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.cfg.Lease = time.Second
		const steps = 2
		rid := h.fake.submit(map[string]any{"topic": "lost lease", "steps": steps})
		row := insertTask(t, h.tasks, "u", "th", rid, reportTools)
		claimed := make(chan struct{})
		h.start(func(_ *taskpoller.Config, d *taskpoller.Deps) {
			d.Tasks = lateClaims{TaskStore: d.Tasks, once: claimed}
		})
		testkit.Receive(t, 30*time.Second, "the first poller's claim", claimed)
		h.start()
		h.waitStatus(row.ID, store.TaskStatusCompleted, 60*time.Second)
		h.fake.mu.Lock()
		calls, overlaps := h.fake.calls["get_report_status "+rid], h.fake.overlaps
		h.fake.mu.Unlock()
		if calls != steps || overlaps != 0 {
			t.Fatalf("%d status calls (%d overlapping), want %d: the poller that lost its lease polled", calls, overlaps, steps)
		}
	})
}

// While the poller is disconnected from NATS it sends no status call: a
// request published then would sit in the client's reconnect buffer and
// reach the upstream once NATS is back, after the poller gave up on it
// and beside the polls made since. The task ends with exactly its own
// status calls.
func TestNoStatusCallIsBufferedWhileDisconnected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		h.cfg.Lease = 2 * time.Second
		const steps = 2
		rid := h.fake.submit(map[string]any{"topic": "disconnected", "steps": steps})
		h.start()
		h.bus.Stop()
		row := insertTask(t, h.tasks, "u", "th", rid, reportTools)
		// Polls fail while NATS is away, each recorded as an error.
		testkit.Eventually(t, 60*time.Second, "a failed poll while NATS is down", func() bool {
			return h.get(row.ID).ConsecutivePollErrorCount >= 2
		})
		h.bus.Start(t)
		h.waitStatus(row.ID, store.TaskStatusCompleted, 60*time.Second)
		h.fake.mu.Lock()
		calls, overlaps := h.fake.calls["get_report_status "+rid], h.fake.overlaps
		h.fake.mu.Unlock()
		if calls != steps || overlaps != 0 {
			t.Fatalf("%d status calls (%d overlapping), want %d: calls sent while disconnected reached the upstream later", calls, overlaps, steps)
		}
	})
}
