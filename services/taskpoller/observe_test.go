package taskpoller_test

import (
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics/metricstest"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func withMetrics(m *metrics.Taskpoller) func(*taskpoller.Config, *taskpoller.Deps) {
	return func(_ *taskpoller.Config, d *taskpoller.Deps) { d.Metrics = m }
}

// A poll moves the poll counter and the lag histogram; a failing status
// call moves poll_errors{code}; the stored results count by status; the
// notification of the finished task counts as published.
func TestPollMetricsMove(t *testing.T) {
	t.Parallel()
	h := setup(t, store.BackendSQLite)
	reg := metrics.NewRegistry()
	val := func(name string, labels map[string]string) float64 { return metricstest.Value(t, reg, name, labels) }
	h.fake.fail("get_report_status", bus.Errorf(bus.CodeUpstreamTimeout, "upstream timed out"))
	rid := h.fake.submit(map[string]any{"topic": "metrics", "steps": 1})
	row := insertTask(t, h.tasks, "u", "th-m", rid, reportTools)
	h.start(withMetrics(metrics.NewTaskpoller(reg)))
	testkit.Eventually(t, 10*time.Second, "a failed poll to be counted", func() bool {
		return val("mcpbus_taskpoller_poll_errors_total", map[string]string{"code": "upstream_timeout"}) >= 1
	})
	if n := val("mcpbus_taskpoller_polls_total", map[string]string{"outcome": "upstream_timeout"}); n < 1 {
		t.Errorf("polls{upstream_timeout} = %v, want at least 1", n)
	}
	h.fake.fail("get_report_status", nil)
	h.waitStatus(row.ID, store.TaskStatusCompleted, 10*time.Second)
	if n := val("mcpbus_taskpoller_polls_total", map[string]string{"outcome": "ok"}); n < 1 {
		t.Errorf("polls{ok} = %v, want at least 1", n)
	}
	if n := val("mcpbus_tasks_status_total", map[string]string{"status": store.TaskStatusCompleted}); n != 1 {
		t.Errorf("status{completed} = %v, want 1", n)
	}
	polls := val("mcpbus_taskpoller_polls_total", map[string]string{"outcome": "ok"}) + val("mcpbus_taskpoller_polls_total", map[string]string{"outcome": "upstream_timeout"})
	if n := val("mcpbus_taskpoller_poll_lag_seconds", nil); n != polls {
		t.Errorf("poll lag samples = %v, want one per poll (%v)", n, polls)
	}
	testkit.Eventually(t, 10*time.Second, "the completion's notification to be counted", func() bool {
		return val("mcpbus_taskpoller_notifications_published_total", nil) >= 1
	})
}

// A notification that cannot be published moves the failure counter on
// every attempt and the dead-letter counter once it is given up.
func TestDeadLetterMetricMoves(t *testing.T) {
	t.Parallel()
	h := setup(t, store.BackendSQLite)
	reg := metrics.NewRegistry()
	pub := &flakyPublisher{JetStream: h.bus.JS, failAll: true}
	dead := insertTask(t, h.tasks, "u", "th-dead", "t405", tasks.DriverData{StatusTool: "get_report_status", CancelTool: "cancel_report"})
	h.start(withMetrics(metrics.NewTaskpoller(reg)), func(_ *taskpoller.Config, d *taskpoller.Deps) { d.Events = pub })
	testkit.Eventually(t, 15*time.Second, "dead letter", func() bool {
		return h.get(dead.ID).NotificationStatus == store.NotificationDeadLetter
	})
	if n := metricstest.Value(t, reg, "mcpbus_taskpoller_dead_letters_total", nil); n != 1 {
		t.Errorf("dead letters = %v, want 1", n)
	}
	if n := metricstest.Value(t, reg, "mcpbus_taskpoller_notification_failures_total", nil); n != tasks.MaxNotificationAttempts {
		t.Errorf("publish failures = %v, want %d", n, tasks.MaxNotificationAttempts)
	}
}
