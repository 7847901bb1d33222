package tokens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Config is the tokens service's configuration (plain data).
type Config struct {
	// StopTimeout bounds the wait for in-flight requests on shutdown.
	// Defaults to 10s.
	StopTimeout time.Duration
}

// Pinger is the part of the store this service checks at start.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deps are the tokens service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	// Store is the database; required.
	Store Pinger
}

// Service is the tokens service.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
}

// New validates the dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.Store == nil {
		return nil, errors.New("tokens: NC and Store are required")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	return &Service{cfg: cfg, deps: deps, log: observability.ForService(deps.Log, "tokens")}, nil
}

// Run checks the database, registers and serves until ctx is cancelled.
func (s *Service) Run(ctx context.Context) error {
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := s.deps.Store.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("tokens: database: %w", err)
	}
	svc, err := microsvc.Register(s.deps.NC, bus.ServiceTokens, "OAuth custody: client_credentials and refresh_token grants, the encrypted refresh-token chain shared by replicas", s.log)
	if err != nil {
		return err
	}
	svc.SetReady(true)
	s.log.Info("tokens service started")
	<-ctx.Done()
	grace, cancelGrace := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancelGrace()
	err = svc.Stop(grace)
	s.log.Info("tokens service stopped")
	return err
}

// Spec builds the service from a process runtime (mains and `mcpbus serve`).
var Spec = bootstrap.Spec{Name: "tokens", NeedsStore: true, Build: func(rt *bootstrap.Runtime) (bootstrap.Runner, error) {
	return New(Config{}, Deps{Log: rt.Log, NC: rt.NC, Store: rt.Store})
}}
