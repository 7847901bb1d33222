// Package microsvc registers an mcpbus service with the NATS micro framework
// (name, version, endpoints, stats) and gives it the health endpoint every
// service answers on bus.Names.Health(name). Every endpoint it adds
// answers only on a reply subject the caller may receive on
// (bus.Names.ReplyAllowed); any other request is dropped unanswered,
// counted (metrics.RepliesDropped) and audited (bus.DroppedReply).
package microsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
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
	err = s.AddEndpoint("health", names.Health(name), micro.HandlerFunc(func(r micro.Request) {
		status := "starting"
		if s.ready.Load() {
			status = "ok"
		}
		_ = r.RespondJSON(bus.HealthReply{Service: name, Status: status, Ready: s.ready.Load()})
	}), micro.WithEndpointQueueGroupDisabled())
	if err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("add health endpoint for %s: %w", name, err)
	}
	return s, nil
}

// AddEndpoint adds the endpoint name on subject served by h, behind the
// reply guard: a request whose reply subject its caller could not receive
// on (bus.Names.ReplyAllowed) never reaches h. Every endpoint of a service
// is added here.
func (s *Service) AddEndpoint(name, subject string, h micro.Handler, opts ...micro.EndpointOpt) error {
	guarded := micro.HandlerFunc(func(r micro.Request) {
		if !s.Names.ReplyAllowed(r.Subject(), r.Reply()) {
			s.dropped(r)
			return
		}
		h.Handle(r)
	})
	if err := s.Micro.AddEndpoint(name, guarded, append(opts, micro.WithEndpointSubject(subject))...); err != nil {
		return fmt.Errorf("add endpoint %s on %s: %w", name, subject, err)
	}
	return nil
}

// dropped counts, logs and audits a request dropped for its reply subject.
// The audit record goes to the audit stream directly (the guard sits below
// every service's audit writer); with audit off there is no stream and it
// goes nowhere.
func (s *Service) dropped(r micro.Request) {
	metrics.RepliesDropped.WithLabelValues(s.Name).Inc()
	user, _ := s.Names.UserOf(r.Subject())
	reply := r.Reply()
	if len(reply) > maxRecordedReply {
		reply = reply[:maxRecordedReply]
	}
	if s.Log != nil {
		s.Log.Warn("request dropped: its reply subject is not an inbox its caller may receive on",
			"subject", r.Subject(), "reply", reply, "user", user)
	}
	rec, err := json.Marshal(bus.DroppedReply{Kind: bus.KindReplyDropped, Time: time.Now().UTC(), User: user,
		Service: s.Name, Subject: r.Subject(), Reply: reply})
	if err == nil && s.nc != nil {
		err = s.nc.Publish(s.Names.AuditReplyDropped(user), rec)
	}
	if err != nil && s.Log != nil {
		s.Log.Warn("audit record of a dropped request not written", "error", err)
	}
}

// maxRecordedReply bounds the reply subject kept in a log line or audit
// record.
const maxRecordedReply = 256

// Handle adds an endpoint on subject served by fn (see bus.Handler).
func Handle[Req, Resp any](s *Service, name, subject string, fn bus.HandlerFunc[Req, Resp]) error {
	return s.AddEndpoint(name, subject, handler(s, fn))
}

// AddVerb adds the endpoint name on the plain subject of the end-user verb
// v, served by h, and, when the deployment serves per-user subjects
// (nats.bind_identity), the endpoint name+"-user" on every user's subject
// of v, served by h through bus.BindUser (the caller is the subject's user).
func (s *Service) AddVerb(name string, v bus.Verb, h micro.Handler) error {
	if err := s.AddEndpoint(name, s.Names.Plain(v), h); err != nil {
		return err
	}
	if !s.Names.UserSubjects() {
		return nil
	}
	return s.AddEndpoint(name+"-user", s.Names.AnyUser(v), bus.BindUser(s.Names, s.Log, h))
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
