package bootstrap

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// Runner is a service: Run blocks until ctx is cancelled.
type Runner interface {
	Run(ctx context.Context) error
}

// Spec describes how to build one service from a Runtime.
type Spec struct {
	Name       string
	NeedsStore bool
	Build      func(rt *Runtime) (Runner, error)
}

// Serve wires one service (config, NATS, database when needed) and runs it
// until ctx is cancelled.
func Serve(ctx context.Context, o Options, spec Spec) error {
	rt, err := Load(o, Stderr)
	if err != nil {
		return err
	}
	shutdown, err := rt.StartTracing(ctx, spec.Name)
	if err != nil {
		return err
	}
	defer rt.StopTracing(shutdown)
	return ServeWith(ctx, rt, spec)
}

// ServeWith runs spec on an already loaded Runtime, connecting what it needs
// and closing it afterwards.
func ServeWith(ctx context.Context, rt *Runtime, spec Spec) error {
	defer func() { _ = rt.Close() }()
	h, err := startHealth(rt, spec)
	if err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	defer h.close()
	if err := rt.ConnectNATS(ctx, "mcpbus-"+spec.Name); err != nil {
		return fmt.Errorf("%s: %w", spec.Name, err)
	}
	if spec.NeedsStore {
		if err := rt.OpenStore(ctx, true); err != nil {
			return fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	svc, err := spec.Build(rt)
	if err != nil {
		return err
	}
	h.serving(svc, true)
	// Readiness goes false as soon as shutdown starts, before Run drains.
	stop := context.AfterFunc(ctx, func() { h.serving(svc, false) })
	defer stop()
	defer h.serving(svc, false)
	return svc.Run(ctx)
}

// SignalContext is cancelled by SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Main is a service binary's whole main: flags, signals, exit status.
func Main(spec Spec) {
	EnableSubreaper()
	fs := flag.NewFlagSet(spec.Name, flag.ExitOnError)
	var o Options
	o.Register(fs)
	_ = fs.Parse(os.Args[1:])
	ctx, stop := SignalContext()
	defer stop()
	if err := Serve(ctx, o, spec); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "mcpbus %s: %v\n", spec.Name, err)
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
