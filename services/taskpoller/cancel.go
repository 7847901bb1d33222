package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// cancel makes the remote cancel call for a claimed cancel request and
// stores the terminal status the server reports. Any failure (a transport
// error, isError, an invalid or non-terminal reply) schedules another
// attempt with backoff, forever; only an unresolvable task handle fails the
// task.
func (p *poller) cancel(ctx context.Context, st *passStats, t store.Task) {
	p.callAndApply(ctx, st, t, cancelCall)
}
