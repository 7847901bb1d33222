// Package microsvc registers an mcpbus service with the NATS micro framework
// (name, version, endpoints, stats) and gives it the health endpoint every
// service answers on bus.Names.Health(name).
package microsvc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Version is the mcpbus version reported to micro.
var Version = "0.1.0"

// Service is a registered micro service plus the bookkeeping a service's Run
// needs: the base context of its handlers, the wait group of in-flight
// requests and a readiness flag.
type Service struct {
	Micro micro.Service
	Name  string
	Log   *slog.Logger
	// Names are the deployment's (Register's names).
	Names bus.Names

	nc       *nats.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	inflight sync.WaitGroup
	ready    atomic.Bool
}

// Register adds the micro service of the deployment names (name is the
// base name, such as bus.ServiceDiscovery) and its health endpoint
// (names.Health(name)). The handlers' base context is cancelled by Stop.
func Register(nc *nats.Conn, names bus.Names, name, description string, log *slog.Logger) (*Service, error) {
	host, _ := os.Hostname()
	m, err := micro.AddService(nc, micro.Config{
		Name: names.Service(name), Version: Version, Description: description,
		Metadata: map[string]string{"host": host, "pid": fmt.Sprint(os.Getpid()), "namespace": names.Namespace()},
	})
	if err != nil {
		return nil, fmt.Errorf("register %s with nats micro: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{Micro: m, Name: name, Log: log, Names: names, nc: nc, ctx: ctx, cancel: cancel}
	err = m.AddEndpoint("health", micro.HandlerFunc(func(r micro.Request) {
		status := "starting"
		if s.ready.Load() {
			status = "ok"
		}
		_ = r.RespondJSON(bus.HealthReply{Service: name, Status: status, Ready: s.ready.Load()})
	}), micro.WithEndpointSubject(names.Health(name)), micro.WithEndpointQueueGroupDisabled())
	if err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("add health endpoint for %s: %w", name, err)
	}
	return s, nil
}

// Handle adds an endpoint on subject served by fn (see bus.Handler).
func Handle[Req, Resp any](s *Service, name, subject string, fn bus.HandlerFunc[Req, Resp]) error {
	if err := s.Micro.AddEndpoint(name, handler(s, fn), micro.WithEndpointSubject(subject)); err != nil {
		return fmt.Errorf("add endpoint %s on %s: %w", name, subject, err)
	}
	return nil
}

// AddVerb adds the endpoint name on the plain subject of the end-user verb
// v, served by h, and, when the deployment serves per-user subjects
// (nats.bind_identity), the endpoint name+"-user" on every user's subject
// of v, served by h through bus.BindUser (the caller is the subject's user).
func (s *Service) AddVerb(name string, v bus.Verb, h micro.Handler) error {
	if err := s.Micro.AddEndpoint(name, h, micro.WithEndpointSubject(s.Names.Plain(v))); err != nil {
		return fmt.Errorf("add endpoint %s on %s: %w", name, s.Names.Plain(v), err)
	}
	if !s.Names.UserSubjects() {
		return nil
	}
	if err := s.Micro.AddEndpoint(name+"-user", bus.BindUser(s.Names, s.Log, h), micro.WithEndpointSubject(s.Names.AnyUser(v))); err != nil {
		return fmt.Errorf("add endpoint %s-user on %s: %w", name, s.Names.AnyUser(v), err)
	}
	return nil
}

// HandleVerb is Handle for an end-user verb (see AddVerb).
func HandleVerb[Req, Resp any](s *Service, name string, v bus.Verb, fn bus.HandlerFunc[Req, Resp]) error {
	return s.AddVerb(name, v, handler(s, fn))
}

// handler is fn under the service's base context and in-flight count.
func handler[Req, Resp any](s *Service, fn bus.HandlerFunc[Req, Resp]) micro.Handler {
	return bus.Handler(s.ctx, &s.inflight, s.Log, fn)
}

// SetReady marks the service ready (health says "ok").
func (s *Service) SetReady(v bool) { s.ready.Store(v) }

// Ready reports readiness.
func (s *Service) Ready() bool { return s.ready.Load() }

// Stop is the service's two-phase stop. First it stops accepting: health
// says not ready, the endpoints drain (unsubscribed, and the server has
// seen it once Stop logs "service draining", so a new request finds no
// responder here: unavailable, or another replica). Then it lets in-flight
// handlers finish until grace is done (they are bounded by their
// requesters' deadlines anyway), cancels their base context and waits for
// them.
func (s *Service) Stop(grace context.Context) error {
	s.ready.Store(false)
	err := s.Micro.Stop()
	if s.nc != nil && s.nc.IsConnected() {
		fctx, cancel := context.WithTimeout(grace, 5*time.Second)
		_ = s.nc.FlushWithContext(fctx)
		cancel()
	}
	if s.Log != nil {
		s.Log.Info("service draining: no new requests; waiting for those in flight")
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-grace.Done():
	}
	s.cancel()
	<-done
	return err
}
