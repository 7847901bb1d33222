package taskpoller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/microsvc"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/replica"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/tasks"
)

// Config is the taskpoller service's configuration (plain data).
type Config struct {
	// Enabled runs the poller and serves the task API (mcp_tasks.enabled).
	// When false the service only answers health, and the task API replies
	// unavailable.
	Enabled bool
	// Tasks are the mcp_tasks knobs. Zero fields default to config.yaml's
	// defaults.
	Tasks tasks.Settings
	// Lease is the poll/cancel lease and the notification lease. Defaults to
	// 120s.
	Lease time.Duration
	// MaxConcurrentPolls bounds each step's claim. Defaults to 8.
	MaxConcurrentPolls int
	// CallTimeouts maps a server name to its tool_call_timeout (the startup
	// configuration). A server without one uses Lease; no call outlives
	// Lease.
	CallTimeouts map[string]time.Duration
	// LeaseOwner identifies this replica: the process's replica id
	// (bootstrap.Runtime.ReplicaID). Defaults to a new replica.NewID.
	LeaseOwner string
	// StopTimeout bounds the wait for in-flight API requests and the lease
	// releases on shutdown (shutdown.drain_seconds). Defaults to 10s.
	StopTimeout time.Duration
}

// ConfigFrom builds the Config from config.yaml and the startup
// extensions config.
func ConfigFrom(s *config.Settings, ext *config.Extensions) Config {
	c := Config{
		Enabled:            s.MCPTasks.Enabled,
		Tasks:              tasks.SettingsFrom(s.MCPTasks),
		Lease:              time.Duration(s.MCPTasks.LeaseSeconds) * time.Second,
		MaxConcurrentPolls: s.MCPTasks.MaxConcurrentPolls,
		CallTimeouts:       map[string]time.Duration{},
		StopTimeout:        time.Duration(s.Shutdown.DrainSeconds) * time.Second,
	}
	if ext != nil {
		for _, srv := range ext.Enabled() {
			if srv.ToolCallTimeout > 0 {
				c.CallTimeouts[srv.Name] = srv.ToolCallTimeout
			}
		}
	}
	return c
}

func (c Config) withDefaults() Config {
	d := tasks.DefaultSettings()
	c.Tasks.PollInterval = cmp.Or(c.Tasks.PollInterval, d.PollInterval)
	c.Tasks.MaxPollBackoff = cmp.Or(c.Tasks.MaxPollBackoff, d.MaxPollBackoff)
	c.Tasks.InputRequiredPollInterval = cmp.Or(c.Tasks.InputRequiredPollInterval, d.InputRequiredPollInterval)
	c.Tasks.TrackingDegradedAfterErrors = cmp.Or(c.Tasks.TrackingDegradedAfterErrors, d.TrackingDegradedAfterErrors)
	c.Tasks.MaxResultBytes = cmp.Or(c.Tasks.MaxResultBytes, d.MaxResultBytes)
	c.Tasks.ResultPreviewMaxChars = cmp.Or(c.Tasks.ResultPreviewMaxChars, d.ResultPreviewMaxChars)
	c.Lease = cmp.Or(c.Lease, 120*time.Second)
	c.MaxConcurrentPolls = cmp.Or(c.MaxConcurrentPolls, 8)
	c.StopTimeout = cmp.Or(c.StopTimeout, 10*time.Second)
	if c.LeaseOwner == "" {
		c.LeaseOwner = replica.NewID()
	}
	return c
}

func (c Config) validate() error {
	var problems []string
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Tasks.PollInterval", c.Tasks.PollInterval}, {"Tasks.MaxPollBackoff", c.Tasks.MaxPollBackoff},
		{"Tasks.InputRequiredPollInterval", c.Tasks.InputRequiredPollInterval}, {"Lease", c.Lease},
		{"StopTimeout", c.StopTimeout},
	} {
		if d.v < 0 {
			problems = append(problems, fmt.Sprintf("%s must be positive, got %s", d.name, d.v))
		}
	}
	if c.MaxConcurrentPolls < 1 {
		problems = append(problems, fmt.Sprintf("MaxConcurrentPolls must be at least 1, got %d", c.MaxConcurrentPolls))
	}
	if len(problems) > 0 {
		return fmt.Errorf("taskpoller: config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// EventPublisher publishes to JetStream; jetstream.JetStream is one.
type EventPublisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Deps are the taskpoller service's dependencies.
type Deps struct {
	Log *slog.Logger
	NC  *nats.Conn
	// Names are the deployment's subjects, buckets and stream (the
	// zero value: the default namespace).
	Names bus.Names
	// Store is the database; required.
	Store store.Pinger
	// Tasks is the durable task store; required when enabled.
	Tasks store.TaskStore
	// Events publishes task notifications; required when enabled.
	Events EventPublisher
	// Clock stamps the completion of remote calls and publishes. Defaults
	// to time.Now. (Claims and leases use the database clock.)
	Clock func() time.Time
	// OnPass, when set, receives each pass's counts (tests, benchmarks).
	OnPass func(PassStats)
	// Metrics are the service's Prometheus metrics
	// (metrics.NewTaskpoller on the process's registry). Defaults to
	// metrics on a registry of their own.
	Metrics *metrics.Taskpoller
}

// Service is the taskpoller service.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
}

// New validates the configuration and dependencies and builds the service.
func New(cfg Config, deps Deps) (*Service, error) {
	if deps.NC == nil || deps.Store == nil {
		return nil, errors.New("taskpoller: NC and Store are required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Enabled && (deps.Tasks == nil || deps.Events == nil) {
		return nil, errors.New("taskpoller: Tasks and Events are required when mcp_tasks is enabled")
	}
	if deps.Log == nil {
		deps.Log = observability.Discard()
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.NewTaskpoller(nil)
	}
	return &Service{cfg: cfg, deps: deps, log: observability.ForService(deps.Log, "taskpoller")}, nil
}

// LeaseOwner is this replica's lease owner.
func (s *Service) LeaseOwner() string { return s.cfg.LeaseOwner }

// Run checks the database, registers, serves the task API and polls until
// ctx is cancelled. It returns after every goroutine it started has ended.
func (s *Service) Run(ctx context.Context) error {
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := s.deps.Store.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("taskpoller: database: %w", err)
	}
	svc, err := microsvc.Register(s.deps.NC, s.deps.Names, bus.ServiceTaskpoller, "durable MCP tasks: leased polling, cancel, notifications", s.log)
	if err != nil {
		return err
	}
	if err := s.registerAPI(svc); err != nil {
		_ = svc.Stop(context.Background())
		return err
	}
	// The poller stops claiming when ctx ends; the rows it holds are
	// finished under workCtx, cancelled only once StopTimeout has passed.
	workCtx, cancelWork := context.WithCancel(context.Background())
	defer cancelWork()
	var wg sync.WaitGroup
	if s.cfg.Enabled {
		p := newPoller(s)
		p.stop = ctx.Done()
		wg.Go(func() { p.run(workCtx) })
	}
	svc.SetReady(true)
	s.log.Info("taskpoller service started", "enabled", s.cfg.Enabled, "lease_owner", s.cfg.LeaseOwner)
	<-ctx.Done()
	svc.SetReady(false)
	grace, cancelGrace := context.WithTimeout(context.Background(), s.cfg.StopTimeout)
	defer cancelGrace()
	err = svc.Stop(grace)
	waitUntil(&wg, grace)
	cancelWork()
	wg.Wait()
	s.log.Info("taskpoller service stopped")
	return err
}

// StartupCheck refuses a start the configuration cannot serve: the
// task_toolsets problems of config.CrossCheck, and mcp_tasks.enabled on the
// memory backend. Mains call it before opening the database.
func StartupCheck(ext *config.Extensions, s *config.Settings) error {
	var msgs []string
	if ext != nil {
		for _, p := range config.CrossCheck(ext, s) {
			if p.Field == "task_toolsets" && p.Severity == config.SeverityError {
				msgs = append(msgs, p.String())
			}
		}
	}
	if len(msgs) == 0 && s.MCPTasks.Enabled && s.Database.Backend == config.BackendMemory {
		msgs = append(msgs, "mcp_tasks.enabled needs database.backend sqlite or postgres")
	}
	if len(msgs) > 0 {
		return fmt.Errorf("taskpoller: refusing to start: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// waitUntil waits for wg or until ctx is done.
func waitUntil(wg *sync.WaitGroup, ctx context.Context) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
