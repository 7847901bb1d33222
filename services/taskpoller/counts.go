package taskpoller

import (
	"context"
	"time"

	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// countTimeout bounds the two count queries of refreshCounts.
const countTimeout = 10 * time.Second

// refreshCounts sets the task gauges from the database: mcpbus_tasks{status}
// (every status, 0 when it has no rows) and
// mcpbus_taskpoller_outbox_backlog (rows with an undelivered notification).
// It runs at most once per poll interval, however often passes run (a busy
// poller runs them back to back): two cheap count queries per interval per
// replica. A failed count leaves the gauges as they were.
func (p *poller) refreshCounts(ctx context.Context) {
	if p.stopping() {
		return
	}
	now := time.Now()
	if !p.counted.IsZero() && now.Sub(p.counted) < p.cfg.Tasks.PollInterval {
		return
	}
	p.counted = now
	cctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	m := p.s.deps.Metrics
	if byStatus, err := p.tasks.CountTasksByStatus(cctx, store.CountTasksByStatusParams{Namespace: p.s.deps.Names.Namespace()}); err != nil {
		p.logCountError("count tasks by status", err)
	} else {
		for _, st := range store.TaskStatuses() {
			m.Tasks.WithLabelValues(st).Set(float64(byStatus[st]))
		}
	}
	if n, err := p.tasks.CountPendingNotifications(cctx, store.CountPendingNotificationsParams{Namespace: p.s.deps.Names.Namespace()}); err != nil {
		p.logCountError("count pending notifications", err)
	} else {
		m.OutboxBacklog.Set(float64(n))
	}
}

func (p *poller) logCountError(what string, err error) {
	if p.stopping() {
		return // the pass's context may be ending
	}
	p.s.log.Warn("task metrics not refreshed", "count", what, observability.Err(err))
}
