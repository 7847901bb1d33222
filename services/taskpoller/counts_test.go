package taskpoller_test

import (
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// mcpbus_tasks{status} follows the table: a submitted task counts as
// submitted (its polls fail, so it stays there), then as completed once a
// poll finishes it; every other status reads 0. The outbox backlog counts
// every row with an undelivered notification, including one backing off
// until far in the future that no pass claims.
func TestTaskCountGauges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		h := setup(t, backend)
		reg := metrics.NewRegistry()
		gauge := func(status string) float64 {
			return metricstest.Value(t, reg, "mcpbus_tasks", map[string]string{"status": status})
		}
		backlog := func() float64 { return metricstest.Value(t, reg, "mcpbus_taskpoller_outbox_backlog", nil) }

		// A row whose notification retries in an hour: never claimed, always
		// in the backlog.
		later := time.Now().Add(time.Hour)
		waiting := &store.Task{UserID: "u", ThreadID: "th-wait", ServerName: "demo", DriverName: "structured",
			RemoteTaskID: "waiting", TaskName: "waiting", DriverData: reportTools.Marshal(), Status: store.TaskStatusCompleted,
			NotificationStatus: store.NotificationRetry, EventVersion: 1, EventFingerprint: "fp", NextNotificationAt: &later}
		if err := insertRow(h.tasks, waiting); err != nil {
			t.Fatal(err)
		}

		h.fake.fail("get_report_status", bus.Errorf(bus.CodeUpstreamTimeout, "upstream timed out"))
		rid := h.fake.submit(map[string]any{"topic": "gauges", "steps": 1})
		row := insertTask(t, h.tasks, "u", "th-g", rid, reportTools)
		h.start(withMetrics(metrics.NewTaskpoller(reg)))
		testkit.Eventually(t, 10*time.Second, "the submitted task to be counted", func() bool {
			return gauge(store.TaskStatusSubmitted) == 1 && gauge(store.TaskStatusCompleted) == 1 &&
				gauge(store.TaskStatusWorking) == 0 && gauge(store.TaskStatusFailed) == 0
		})
		if n := backlog(); n != 1 {
			t.Fatalf("outbox backlog with one waiting notification = %v, want 1", n)
		}

		h.fake.fail("get_report_status", nil)
		h.waitStatus(row.ID, store.TaskStatusCompleted, 10*time.Second)
		testkit.Eventually(t, 10*time.Second, "the completed task to be counted", func() bool {
			return gauge(store.TaskStatusCompleted) == 2 && gauge(store.TaskStatusSubmitted) == 0 &&
				gauge(store.TaskStatusWorking) == 0
		})
		// The completion's notification is delivered; the waiting one stays.
		testkit.Eventually(t, 10*time.Second, "the delivered notification to leave the backlog", func() bool {
			return h.get(row.ID).NotificationStatus == store.NotificationDelivered && backlog() == 1
		})
	})
}

// A row whose driver this poller does not know (written by a newer
// release during a rolling upgrade) is retried with backoff and keeps its
// status: it is neither failed nor handed to another driver.
func TestUnknownDriverIsRetriedNotFailed(t *testing.T) {
	h := setup(t, "sqlite")
	due := time.Now().Add(-time.Millisecond)
	row := &store.Task{UserID: "u", ThreadID: "th-unknown", ServerName: "demo", DriverName: "from-a-newer-release",
		RemoteTaskID: "remote-1", TaskName: "future", DriverData: reportTools.Marshal(), Status: store.TaskStatusSubmitted, NextPollAt: &due}
	if err := insertRow(h.tasks, row); err != nil {
		t.Fatal(err)
	}
	h.start()
	want := "No MCP task driver registered as 'from-a-newer-release'"
	testkit.Eventually(t, 10*time.Second, "the unknown driver's poll to be recorded", func() bool {
		got := h.get(row.ID)
		return got.LastPollError == want
	})
	got := h.get(row.ID)
	if got.Status != store.TaskStatusSubmitted || got.NextPollAt == nil {
		t.Fatalf("after the unknown driver's poll: status %s, next poll %v; want submitted and another poll scheduled", got.Status, got.NextPollAt)
	}
	for _, tool := range []string{"get_report_status", "cancel_report"} {
		if n := h.fake.count(tool, "remote-1"); n != 0 {
			t.Errorf("%s called %d times for a row of an unknown driver", tool, n)
		}
	}
}
