package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// poll makes one status call for a claimed row and applies its outcome
// under the lease: protocol violations fail the task, transient errors back
// off.
func (p *poller) poll(ctx context.Context, st *passStats, t store.Task) {
	lag := since(p.clock(), t.NextPollAt)
	st.addDueDelay(lag)
	p.s.deps.Metrics.PollLag.Observe(lag.Seconds())
	// Its own trace (a poll is not part of any request), linked to the
	// submit's.
	ctx, span := tracing.StartLinked(ctx, "task poll", tasks.TraceparentOf(t.DriverData), tracing.KeyTaskID.String(t.ID), tracing.Server(t.ServerName))
	defer span.End()
	p.drive(ctx, st, t, statusCall)
}
