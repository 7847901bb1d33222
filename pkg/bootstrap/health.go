package bootstrap

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/mcpbus/mcpbus/pkg/healthhttp"
)

// readier is a service that knows when it serves (its NATS endpoints are
// registered); readiness waits for it.
type readier interface{ Ready() bool }

// Health is the health listener of one `serve` process: alive from the
// start, ready while NATS is connected, the KV bucket answers, the database
// pings (once SetDatabase named one), the service is running and, for a
// service that tells, serving. Readiness goes false as soon as shutdown
// starts. A nil *Health (no --health-listen) does nothing.
type Health struct {
	srv     *healthhttp.Server
	running atomic.Bool
	svc     atomic.Value // readier
	db      atomic.Pointer[func(context.Context) error]
}

var (
	errNotRunning = errors.New("service not running")
	errNoNATS     = errors.New("nats not connected")
)

// StartHealth starts rt's health listener, or returns nil when none is
// configured (rt.HealthListen).
func StartHealth(rt *Runtime) (*Health, error) {
	if rt.HealthListen == "" {
		return nil, nil
	}
	h := &Health{}
	checks := healthhttp.Checks{
		"service": func(context.Context) error {
			if !h.running.Load() {
				return errNotRunning
			}
			if r, ok := h.svc.Load().(readier); ok && !r.Ready() {
				return errNotRunning
			}
			return nil
		},
		"nats": func(context.Context) error {
			if rt.NC == nil || !rt.NC.IsConnected() {
				return errNoNATS
			}
			return nil
		},
		"kv": func(ctx context.Context) error {
			if rt.KV == nil {
				return errNoNATS
			}
			_, err := rt.KV.Status(ctx)
			return err
		},
		"database": func(ctx context.Context) error {
			if ping := h.db.Load(); ping != nil {
				return (*ping)(ctx)
			}
			return nil // no database (yet: the service is not running either)
		},
	}
	srv, err := healthhttp.Start(rt.HealthListen, checks, rt.Log)
	if err != nil {
		return nil, err
	}
	h.srv = srv
	return h, nil
}

// Addr is the health listener's address ("" without one): with port 0 in
// --health-listen, the port the system chose.
func (h *Health) Addr() string {
	if h == nil || h.srv == nil {
		return ""
	}
	return h.srv.Addr()
}

// SetDatabase adds the service's database to readiness.
func (h *Health) SetDatabase(ping func(context.Context) error) {
	if h != nil && ping != nil {
		h.db.Store(&ping)
	}
}

// Run runs svc until ctx is cancelled: ready while it runs and serves, not
// ready as soon as ctx ends (before svc drains).
func (h *Health) Run(ctx context.Context, svc Runner) error {
	h.serving(svc, true)
	stop := context.AfterFunc(ctx, func() { h.serving(svc, false) })
	defer stop()
	defer h.serving(svc, false)
	return svc.Run(ctx)
}

// serving marks the service as running (true) or stopping (false).
func (h *Health) serving(svc Runner, on bool) {
	if h == nil {
		return
	}
	if on {
		if r, ok := svc.(readier); ok {
			h.svc.Store(r)
		}
	}
	h.running.Store(on)
}

// Close stops the listener.
func (h *Health) Close() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = h.srv.Close(ctx)
}
