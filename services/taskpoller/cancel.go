package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// cancel makes the remote cancel call for a claimed cancel request and
// stores the terminal status the server reports. Any failure (a transport
// error, isError, an invalid or non-terminal reply) schedules another
// attempt with backoff, forever; only an unresolvable task handle fails the
// task.
func (p *poller) cancel(ctx context.Context, st *passStats, t store.Task) {
	// Its own trace (a poll is not part of any request), linked to the
	// submit's.
	ctx, span := tracing.StartLinked(ctx, "task cancel", tasks.TraceparentOf(t.DriverData), tracing.KeyTaskID.String(t.ID), tracing.Server(t.ServerName))
	defer span.End()
	p.drive(ctx, st, t, cancelCall)
}
