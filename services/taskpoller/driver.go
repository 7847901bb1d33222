package taskpoller

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// A driver follows one kind of durable task on its upstream, under the
// poller's lease, backoff and caps: a task toolset's status and cancel
// tools (driver "structured", remotecall.go) or the upstream's own MCP
// task API (driver "native", native.go). A row's driver_name picks it;
// what each driver stores is applied by package tasks (transitions.go).
type driver interface {
	// poll makes the status call(s) for the claimed row t and stores what
	// they decided.
	poll(ctx context.Context, p *poller, st *passStats, t store.Task)
	// cancel makes the cancel call(s) for the claimed cancel request t and
	// stores what they decided.
	cancel(ctx context.Context, p *poller, st *passStats, t store.Task)
}

// drivers are the drivers by driver_name.
var drivers = map[string]driver{
	tasks.DriverStructured: toolsetDriver{},
	tasks.DriverNative:     nativeDriver{},
}

// drive hands the claimed row t to its driver: a poll, or a cancel when
// rc is cancelCall. A row of a driver this poller does not know (written
// by a newer release) is retried with backoff, not failed.
func (p *poller) drive(ctx context.Context, st *passStats, t store.Task, rc remoteCall) {
	d, ok := drivers[t.DriverName]
	if !ok {
		s, at, msg := p.settings(), p.clock(), tasks.UnknownDriverError(t.DriverName).Error()
		p.updateTask(ctx, st, t.ID, func(row *store.Task) { rc.retry(row, msg, at, s) })
		return
	}
	if rc.role == tasks.RoleCancel {
		d.cancel(ctx, p, st, t)
	} else {
		d.poll(ctx, p, st, t)
	}
}

// toolsetDriver is the driver of task toolsets (remotecall.go).
type toolsetDriver struct{}

func (toolsetDriver) poll(ctx context.Context, p *poller, st *passStats, t store.Task) {
	p.callAndApply(ctx, st, t, statusCall)
}

func (toolsetDriver) cancel(ctx context.Context, p *poller, st *passStats, t store.Task) {
	p.callAndApply(ctx, st, t, cancelCall)
}

// nativeDriver is the driver of native MCP tasks (native.go).
type nativeDriver struct{}

func (nativeDriver) poll(ctx context.Context, p *poller, st *passStats, t store.Task) {
	p.pollNative(ctx, st, t)
}

func (nativeDriver) cancel(ctx context.Context, p *poller, st *passStats, t store.Task) {
	p.cancelNative(ctx, st, t)
}
