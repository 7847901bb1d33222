package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// poll makes one status call for a claimed row and applies its outcome
// under the lease: protocol violations fail the task, transient errors back
// off.
func (p *poller) poll(ctx context.Context, st *passStats, t store.Task) {
	lag := since(p.clock(), t.NextPollAt)
	st.addDueDelay(lag)
	p.s.deps.Metrics.PollLag.Observe(lag.Seconds())
	p.callAndApply(ctx, st, t, statusCall)
}
