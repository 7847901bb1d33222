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

// health is the health listener of one `serve` process: alive from the
// start, ready while NATS is connected, the KV bucket answers, the database
// pings (when the service has one), the service is running and, for a
// service that tells, serving. Readiness goes false as soon as shutdown
// starts.
type health struct {
	srv     *healthhttp.Server
	running atomic.Bool
	svc     atomic.Value // readier
}

var (
	errNotRunning = errors.New("service not running")
	errNoNATS     = errors.New("nats not connected")
)

// startHealth starts rt's health listener, or returns nil when none is
// configured.
func startHealth(rt *Runtime, spec Spec) (*health, error) {
	if rt.HealthListen == "" {
		return nil, nil
	}
	h := &health{}
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
	}
	if spec.NeedsStore {
		checks["database"] = func(ctx context.Context) error {
			if rt.Store == nil {
				return errNotRunning
			}
			return rt.Store.Ping(ctx)
		}
	}
	srv, err := healthhttp.Start(rt.HealthListen, checks, rt.Log)
	if err != nil {
		return nil, err
	}
	h.srv = srv
	return h, nil
}

// serving marks the service as running (true) or stopping (false).
func (h *health) serving(svc Runner, on bool) {
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

// close stops the listener.
func (h *health) close() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = h.srv.Close(ctx)
}
