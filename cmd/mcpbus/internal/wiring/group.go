package wiring

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// ReadyTimeout bounds the wait for one service to answer ready at start.
const ReadyTimeout = 60 * time.Second

// Hooks hear a group's services come and go (logs, tests). Nil fields are
// skipped.
type Hooks struct {
	// Started hears a service that answers its health subject ready.
	Started func(name string)
	// Stopping hears a service about to be told to stop; Stopped one whose
	// Run has returned (drained and closed).
	Stopping, Stopped func(name string)
}

// Group is a set of services running in one process, in dependency order.
type Group struct {
	hooks   Hooks
	running []*running // in start order
	failed  chan error
}

type running struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start runs services in order on rt's configuration and the shared db:
// each connects on its own and is started once the one before answers
// ready on its health subject. When one fails to start, those started are
// stopped (in reverse) and the error returned. ctx bounds the start only;
// the services run until Stop.
func Start(ctx context.Context, rt *bootstrap.Runtime, db store.Store, services []Service, hooks Hooks) (*Group, error) {
	// The readiness checks ask as the api would (its NATS user may ask every
	// service's health subject), so a group also starts on per-service users.
	nc, err := bus.Connect(rt.Settings.NATS.URL, "mcpbus-dev-health", rt.NATSAuthFor(bus.ServiceAPI), rt.Log)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	g := &Group{hooks: hooks, failed: make(chan error, len(services))}
	for _, svc := range services {
		r := &running{name: svc.Name, done: make(chan struct{})}
		var runCtx context.Context
		runCtx, r.cancel = context.WithCancel(context.Background())
		g.running = append(g.running, r)
		go func() {
			defer close(r.done)
			r.err = Serve(runCtx, rt.Share(), svc, db)
			if r.err != nil && runCtx.Err() == nil {
				g.failed <- fmt.Errorf("%s: %w", svc.Name, r.err)
			}
		}()
		if err := awaitReady(ctx, nc, rt.Names, r); err != nil {
			return nil, errors.Join(err, g.Stop())
		}
		if hooks.Started != nil {
			hooks.Started(svc.Name)
		}
	}
	return g, nil
}

// awaitReady asks r's health subject until it answers ready, r exits, ctx
// ends or ReadyTimeout passes.
func awaitReady(ctx context.Context, nc *nats.Conn, names bus.Names, r *running) error {
	deadline := time.NewTimer(ReadyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		hctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		h, err := bus.Request[bus.HealthReply](hctx, nc, names.Health("mcpbus-"+r.name), struct{}{})
		cancel()
		if err == nil && h.Ready {
			return nil
		}
		select {
		case <-r.done:
			return fmt.Errorf("%s: %w", r.name, cmpErr(r.err, errors.New("stopped before it was ready")))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("service %s did not become ready within %s", r.name, ReadyTimeout)
		case <-tick.C:
		}
	}
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// Failed delivers the error of a service whose Run returned on its own.
func (g *Group) Failed() <-chan error { return g.failed }

// Stop stops the services in reverse start order, each drained before the
// next is told to stop, and returns their errors joined. It is idempotent.
func (g *Group) Stop() error {
	var errs []error
	for i := len(g.running) - 1; i >= 0; i-- {
		r := g.running[i]
		if g.hooks.Stopping != nil {
			g.hooks.Stopping(r.name)
		}
		r.cancel()
		<-r.done
		if g.hooks.Stopped != nil {
			g.hooks.Stopped(r.name)
		}
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, r.err))
		}
	}
	g.running = nil
	return errors.Join(errs...)
}
