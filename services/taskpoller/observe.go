package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// countCall counts a status poll by its result (ok, tool_error, invalid or
// the error code of a failed call) and a failed one by code; cancel calls
// are not polls.
func (p *poller) countCall(rc remoteCall, err error, result string) {
	if rc.role != tasks.RoleStatus {
		return
	}
	m := p.s.deps.Metrics
	if err != nil {
		result = string(bus.AsError(err).Code)
		m.PollErrors.WithLabelValues(result).Inc()
	}
	m.Polls.WithLabelValues(result).Inc()
}

// storeCounted stores a call's result under the lease and counts the
// status the row has afterwards (mcpbus_tasks_status_total{status}) once
// it is stored.
func (p *poller) storeCounted(ctx context.Context, st *passStats, id string, apply func(*store.Task)) {
	var status string
	if p.updateTask(ctx, st, id, func(row *store.Task) {
		apply(row)
		status = string(row.Status)
	}) {
		p.s.deps.Metrics.Transitions.WithLabelValues(status).Inc()
	}
}
