package api

import (
	"context"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// drainer is the HTTP half of the api's two-phase stop: once closed, new
// requests are refused with 503 unavailable (a load balancer retries them
// on another replica) while the requests already admitted finish; wait
// returns when they have, or when its context ends.
type drainer struct {
	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	// done is closed by close (closing), so long streams end.
	done chan struct{}
}

// closing is closed once the service drains: a streaming response (the
// audit follow stream) ends then instead of holding the stop.
func (d *drainer) closing() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done == nil {
		d.done = make(chan struct{})
		if d.closed {
			close(d.done)
		}
	}
	return d.done
}

// enter admits a request (false once closed); an admitted one calls leave.
func (d *drainer) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.inflight.Add(1)
	return true
}

func (d *drainer) leave() { d.inflight.Done() }

// close stops admitting requests.
func (d *drainer) close() {
	d.mu.Lock()
	if !d.closed && d.done != nil {
		close(d.done)
	}
	d.closed = true
	d.mu.Unlock()
}

// draining reports whether close was called.
func (d *drainer) draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// wait waits for the admitted requests, or until ctx is done.
func (d *drainer) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { d.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// drainGuard refuses requests once the service drains; liveness and
// readiness are always answered (readiness says not ready) and not counted.
func (s *Service) drainGuard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Path() {
		case "/healthz", "/readyz", "/metrics":
			return next(c)
		}
		if !s.drain.enter() {
			c.Response().Header().Set("Connection", "close")
			return bus.Errorf(bus.CodeUnavailable, "the api is shutting down; retry the request")
		}
		defer s.drain.leave()
		return next(c)
	}
}
