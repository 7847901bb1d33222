package taskpoller

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// callTool calls a raw tool of the task's server with {"task_id": remote id}
// through the toolcall service (mcpbus.internal.call), bounded by the
// server's tool_call_timeout and never longer than the lease. ctx being
// cancelled (the service stopping) cancels the call.
func (p *poller) callTool(ctx context.Context, t *store.Task, tool string) (bus.InternalCallReply, error) {
	timeout, err := p.callTimeout(ctx, t)
	if err != nil {
		return bus.InternalCallReply{}, err
	}
	if err := p.connected(); err != nil {
		return bus.InternalCallReply{}, err
	}
	args, _ := json.Marshal(map[string]string{"task_id": t.RemoteTaskID})
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return bus.Request[bus.InternalCallReply](cctx, p.nc, p.s.deps.Names.InternalCall(), bus.InternalCallRequest{
		Server: t.ServerName, Call: bus.Call{Tool: tool, Arguments: args, UserID: t.UserID, ThreadID: t.ThreadID, TimeoutMS: timeout.Milliseconds()},
	})
}

// callTimeout bounds one remote call for t: the server's
// tool_call_timeout, never longer than the lease, and never past the end
// of the lease claimed in ctx (leaseEnd): a call that would outlast it is
// not made (errLeaseSpent), so a poller that could not claim in time, or
// whose earlier calls took the lease's time, never polls once the lease
// may have moved to another replica.
func (p *poller) callTimeout(ctx context.Context, t *store.Task) (time.Duration, error) {
	d := p.cfg.Lease
	if tct, ok := p.cfg.CallTimeouts[t.ServerName]; ok && tct > 0 {
		d = min(tct, d)
	}
	if end, ok := ctx.Value(leaseEndKey{}).(time.Time); ok {
		left := time.Until(end)
		if left < minCallTime {
			return 0, errLeaseSpent
		}
		d = min(d, left)
	}
	return d, nil
}

// minCallTime is the least time left under the lease worth a remote call.
const minCallTime = 100 * time.Millisecond

// errLeaseSpent refuses a remote call for a row whose lease may end
// before the call would.
var errLeaseSpent = errors.New("the lease on the task ends before a call could: not polled")

// leaseEndKey carries, in a handler's context, the time (this process's
// clock) by which its calls must have ended: the claim's start plus the
// lease, less leaseMargin.
type leaseEndKey struct{}

// withLeaseEnd bounds the calls made under ctx by a lease claimed no
// earlier than claimed (the claim's start: the database's expiry is later).
func (p *poller) withLeaseEnd(ctx context.Context, claimed time.Time) context.Context {
	return context.WithValue(ctx, leaseEndKey{}, claimed.Add(p.cfg.Lease-leaseMargin(p.cfg.Lease)))
}

// leaseMargin is the time left under a lease when its calls must have
// ended: a fifth of it, at most 10 s (the request's trip to the upstream
// and the clocks of the poller and the database).
func leaseMargin(lease time.Duration) time.Duration {
	return min(lease/5, 10*time.Second)
}

// leaseDeadline is ctx bounded by the end of its lease (leaseEnd), for a
// step of several calls.
func leaseDeadline(ctx context.Context, fallback time.Duration) (context.Context, context.CancelFunc) {
	if end, ok := ctx.Value(leaseEndKey{}).(time.Time); ok {
		return context.WithDeadline(ctx, end)
	}
	return context.WithTimeout(ctx, fallback)
}

// callErrorText is the text recorded for a failed call: the public message
// of a bus error (never an internal cause), else the error itself.
func callErrorText(err error) string {
	var e *bus.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

// since returns how long ago t was, or 0 for nil.
func since(now time.Time, t *time.Time) time.Duration {
	if t == nil {
		return 0
	}
	return max(now.Sub(*t), 0)
}

// abandoned reports whether a failed call is to be given back rather
// than recorded: the service is stopping (ctx ended, the call was
// cancelled) or the lease left no time for it (errLeaseSpent). The row's
// lease is then released (releaseLease), which the store refuses once the
// lease has moved.
func abandoned(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, errLeaseSpent)
}

// connected refuses a remote call while this replica is not connected to
// NATS. A request published then waits in the client's reconnect buffer
// and reaches toolcall, and the upstream, once the connection is back:
// after its requester gave up, perhaps after the lease moved, and beside
// the poll the next lease holder makes. Refused, the call is a transient
// failure retried with backoff.
func (p *poller) connected() error {
	if p.nc.IsConnected() {
		return nil
	}
	return bus.Errorf(bus.CodeUnavailable, "not connected to NATS: the call was not sent")
}
