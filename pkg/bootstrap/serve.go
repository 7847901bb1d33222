package bootstrap

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Runner is a service: Run blocks until ctx is cancelled, drains and
// returns.
type Runner interface {
	Run(ctx context.Context) error
}

// Stderr is the default log destination.
var Stderr io.Writer = os.Stderr

// SignalContext is cancelled by SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Serve runs one service on rt: the health listener (when
// rt.HealthListen is set) from the start, the NATS connection (as
// "mcpbus-"+name), then run, which builds the service (opening what else it
// needs, closing it when done) and runs it with h.Run until ctx is
// cancelled. The connection and the listener close when run returns.
func Serve(ctx context.Context, rt *Runtime, name string, run func(ctx context.Context, rt *Runtime, h *Health) error) error {
	h, err := StartHealth(rt)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer h.Close()
	if err := rt.ConnectNATS(ctx, "mcpbus-"+name); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rt.Close()
	return run(ctx, rt, h)
}

// StartProcess starts what a service process has once, whatever it runs:
// the cleanup and tracking of stdio children (TrackChildren), tracing
// (observability.tracing, OTEL_*) and the metrics listener
// (rt.MetricsListen). stop ends tracing and metrics.
func (r *Runtime) StartProcess(ctx context.Context, name string) (stop func(), err error) {
	r.TrackChildren()
	shutdown, err := r.StartTracing(ctx, name)
	if err != nil {
		return nil, err
	}
	stopMetrics, err := r.ServeMetrics(r.MetricsListen)
	if err != nil {
		r.StopTracing(shutdown)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return func() { stopMetrics(); r.StopTracing(shutdown) }, nil
}

// Main is a service binary's whole main: flags, signals, the environment,
// configuration, then Serve with run. The exit status is 1 when anything
// fails.
func Main(name string, run func(ctx context.Context, rt *Runtime, h *Health) error) {
	EnableSubreaper()
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	var o Options
	o.Register(fs)
	_ = fs.Parse(os.Args[1:])
	ctx, stop := SignalContext()
	defer stop()
	err := func() error {
		rt, err := Load(o, config.ReadEnv(), Stderr)
		if err != nil {
			return err
		}
		stop, err := rt.StartProcess(ctx, name)
		if err != nil {
			return err
		}
		defer stop()
		return Serve(ctx, rt, name, run)
	}()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "mcpbus %s: %v\n", name, err)
		os.Exit(1)
	}
}

// EnableSubreaper makes this process the reaper of its stdio servers'
// orphaned descendants (see mcpclient.EnableSubreaper), so a killed process
// group leaves no zombies even where PID 1 does not reap. Call it once at
// process start, before any stdio server is spawned; where it is not
// supported it does nothing.
func EnableSubreaper() {
	if err := mcpclient.EnableSubreaper(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintf(os.Stderr, "mcpbus: cannot become a child subreaper: %v\n", err)
	}
}

// ChildrenDir is where, under workspace.root, each process records its
// stdio children (mcpclient.TrackChildren).
const ChildrenDir = ".mcpbus-children"

// TrackChildren kills what stdio children of processes that died without
// closing their sessions (SIGKILL, OOM) on the same workspace.root left
// running, and records this process's children from now on, in
// <workspace.root>/.mcpbus-children. Call it once at process start, before
// any service runs; a failure is logged, not fatal.
func (r *Runtime) TrackChildren() {
	n, err := mcpclient.TrackChildren(filepath.Join(r.Settings.Workspace.Root, ChildrenDir))
	switch {
	case errors.Is(err, errors.ErrUnsupported):
	case err != nil:
		r.Log.Warn("cannot track stdio children: what a crash leaves running is not cleaned up at the next start", observability.Err(err))
	case n > 0:
		r.Log.Info("killed what the stdio children of crashed mcpbus processes left running", "records", n)
	}
}
