package bootstrap

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/redact"
	"github.com/mcpbus/mcpbus/pkg/replica"
)

// Options are the flags every process takes.
type Options struct {
	ConfigPath     string
	ExtensionsPath string
	NATSURL        string
	Namespace      string
	DatabaseURL    string
	// HealthListen is the address of the health listener (/healthz,
	// /readyz) `serve` runs beside the service; empty runs none.
	HealthListen string
	// MetricsListen is where a `serve` process serves /metrics ("": not
	// at all; the api also serves it on its own listener).
	MetricsListen string
	// Pprof serves Go's profiler at /debug/pprof/ on the metrics listener
	// (only there; needs MetricsListen). Off by default.
	Pprof bool
}

// Register adds the flags to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigPath, "config", "", "config.yaml path (default $MCPBUS_CONFIG, then ./config.yaml)")
	fs.StringVar(&o.ExtensionsPath, "extensions-config", "", "extensions_config.json path (default $MCPBUS_EXTENSIONS_CONFIG, $DEER_FLOW_EXTENSIONS_CONFIG_PATH, then ./extensions_config.json)")
	fs.StringVar(&o.NATSURL, "nats-url", "", "NATS URL (overrides nats.url)")
	fs.StringVar(&o.Namespace, "namespace", "", "deployment namespace on NATS (overrides nats.namespace)")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "PostgreSQL URL (overrides database.url and selects the postgres backend)")
	fs.StringVar(&o.MetricsListen, "metrics-listen", "", "address to serve Prometheus /metrics on, e.g. :9090 (default: none; dev mode and the api serve it on the API listener)")
	fs.BoolVar(&o.Pprof, "pprof", false, "also serve Go's profiler at /debug/pprof/ on the --metrics-listen listener (never on the API listener; default off)")
	fs.StringVar(&o.HealthListen, "health-listen", "", "serve /healthz and /readyz on this host:port beside the service (serve only; default none)")
}

// Runtime is what a process has once loaded and connected: the parts every
// service's Deps are built from.
type Runtime struct {
	Settings       *config.Settings
	Extensions     *config.Extensions
	ExtensionsPath string
	// Env is the process environment, read once (config.ReadEnv).
	Env config.Env
	Log *slog.Logger
	// Names are the deployment's subjects, buckets and stream
	// (nats.namespace).
	Names bus.Names
	// ReplicaID names this process among the replicas of the deployment
	// (replica.NewID, made once per process and shared by its services).
	ReplicaID string
	// HealthListen is Options.HealthListen (serve only; not shared).
	HealthListen string
	// MetricsListen is Options.MetricsListen.
	MetricsListen string
	// Pprof is Options.Pprof: ServeMetrics mounts /debug/pprof/ too.
	Pprof bool
	// Metrics is the process's Prometheus registry (MetricsRegistry);
	// Share keeps it, so dev mode has one for all its services.
	Metrics *prometheus.Registry
	// NATSInProcess, when set (dev mode, whose NATS server runs in this
	// process), is how ConnectNATS reaches it: an in-memory pipe instead
	// of a loopback socket. Share keeps it.
	NATSInProcess nats.InProcessConnProvider

	NC *nats.Conn
	JS jetstream.JetStream
	KV jetstream.KeyValue
}

// Load reads both configuration files (env gives the overrides and the
// default paths) and builds the logger (to w) and the replica id.
func Load(o Options, env config.Env, w io.Writer) (*Runtime, error) {
	sp, sExplicit := config.FindSettingsPath(o.ConfigPath, env)
	settings, err := config.LoadSettings(sp, sExplicit, env)
	if err != nil {
		return nil, err
	}
	if o.NATSURL != "" {
		settings.NATS.URL = o.NATSURL
	}
	if o.Namespace != "" {
		settings.NATS.Namespace = o.Namespace
	}
	names, err := bus.NewNames(settings.NATS.Namespace)
	if err != nil {
		return nil, fmt.Errorf("nats.namespace: %w", err)
	}
	names = names.WithUserSubjects(settings.NATS.BindIdentity)
	if o.DatabaseURL != "" {
		settings.Database.Backend, settings.Database.URL = config.BackendPostgres, o.DatabaseURL
	}
	log := observability.NewLogger(w, settings.Log.Level, settings.Log.Format)
	// The personal launch policy's own checks (refused user_env names,
	// patterns) fail the start, naming the field, before any service runs.
	personal, err := launchpolicy.NewPersonal(launchpolicy.OptionsFrom(settings))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", cmp.Or(settings.Path, "(defaults)"), err)
	}
	if personal.Enabled() && os.Geteuid() != 0 {
		log.Warn("personal stdio connections are on but mcpbus does not run as root: toolcall and discovery refuse to start personal stdio servers, which run only under a uid of their own in their own PID namespace")
	}
	ep, eExplicit := config.FindExtensionsPath(o.ExtensionsPath, env)
	ext, err := config.LoadExtensions(ep, eExplicit, env)
	if err != nil {
		return nil, err
	}
	for _, p := range ext.Problems {
		log.Warn("extensions config problem", "problem", p.String())
	}
	return &Runtime{Settings: settings, Extensions: ext, ExtensionsPath: ext.Path, Env: env, Log: log, Names: names,
		ReplicaID: replica.NewID(), HealthListen: o.HealthListen, MetricsListen: o.MetricsListen, Pprof: o.Pprof}, nil
}

// DrainTimeout is shutdown.drain_seconds: how long each service's in-flight
// work may take once it stops accepting.
func (r *Runtime) DrainTimeout() time.Duration {
	return time.Duration(r.Settings.Shutdown.DrainSeconds) * time.Second
}

// ConnectNATS dials NATS as service name (bus.Service*: its own user and
// inbox prefix, NATSAuthFor) and sets up the config bucket and events
// stream it uses (bus.SetupFor).
func (r *Runtime) ConnectNATS(ctx context.Context, name string) error {
	nc, err := bus.Connect(r.Settings.NATS.URL, name, r.NATSAuthFor(name), r.Log)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("jetstream: %w", err)
	}
	configured := int(r.Settings.NATS.Replicas)
	kv, err := SetupJetStream(ctx, r.logger(), SetupDeadline, name, func(ctx context.Context) (jetstream.KeyValue, error) {
		return bus.SetupFor(ctx, js, r.Names, name, configured)
	})
	if err != nil {
		nc.Close()
		return fmt.Errorf("nats at %s: %w (is JetStream enabled, on at least nats.replicas = %d servers?)",
			redact.URL(r.Settings.NATS.URL), err, bus.StreamReplicas(js, configured))
	}
	r.NC, r.JS, r.KV = nc, js, kv
	r.reconcileReplicas(ctx, name)
	r.registerNATSMetrics(strings.TrimPrefix(name, "mcpbus-"))
	return nil
}

// SetupDeadline is how long a service keeps trying, at start, to create
// the JetStream buckets and streams it uses: a cluster that is forming, or
// busy creating three-copy streams for every service starting with it,
// answers late or not at all for a while.
const SetupDeadline = 2 * time.Minute

// setupAttempt bounds one attempt of SetupJetStream.
const setupAttempt = 10 * time.Second

// SetupJetStream runs setup until it succeeds, each attempt bounded by
// setupAttempt, retrying with backoff (up to 5 s between attempts, each failure logged) until deadline has passed
// or ctx ends; it returns the last error then.
func SetupJetStream[T any](ctx context.Context, log *slog.Logger, deadline time.Duration, service string, setup func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, setupAttempt)
		v, err := setup(actx)
		acancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("after %d attempts in %s: %w", attempt, deadline, err)
		}
		if refused(err) {
			return v, err
		}
		log.Warn("jetstream setup failed; retrying", "service", service, "attempt", attempt, "retry_in", wait, observability.Err(err))
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("after %d attempts in %s: %w", attempt, deadline, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// refused reports whether JetStream answered a setup request with a
// refusal that waiting does not change (a configuration it cannot have,
// such as three replicas on a server outside a cluster). No answer, and
// 503 (no leader for now, not enough servers yet), are worth another
// attempt.
func refused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.Code != http.StatusServiceUnavailable
}

// PresenceKV opens (creating it when missing) the presence bucket, retried
// as SetupJetStream does.
func (r *Runtime) PresenceKV(ctx context.Context) (jetstream.KeyValue, error) {
	return SetupJetStream(ctx, r.logger(), SetupDeadline, "presence", func(ctx context.Context) (jetstream.KeyValue, error) {
		return bus.PresenceKV(ctx, r.JS, r.Names, int(r.Settings.NATS.Replicas))
	})
}

// reconcileReplicas brings every existing bucket and stream of the
// deployment to nats.replicas (bus.ReconcileReplicas), logging what changed
// and warning about what could not, and warns when an explicit count leaves
// a cluster's buckets with fewer copies than it has servers.
func (r *Runtime) reconcileReplicas(ctx context.Context, name string) {
	configured := int(r.Settings.NATS.Replicas)
	want, servers := bus.StreamReplicas(r.JS, configured), bus.ClusterSize(r.NC)
	if configured > 0 && want < min(servers, bus.MaxAutoReplicas) {
		r.Log.Warn("nats.replicas is lower than the NATS cluster's size: losing a server loses the buckets and streams it keeps (set nats.replicas: auto)",
			"replicas", want, "cluster_servers", servers)
	}
	changed, errs := bus.ReconcileReplicas(ctx, r.JS, r.Names, r.Names.ReconcileAtStart(name), configured)
	if len(changed) > 0 {
		r.Log.Info("jetstream replicas reconciled to nats.replicas", "service", name, "replicas", want, "streams", changed)
	}
	for _, err := range errs {
		r.Log.Warn("jetstream stream not reconciled to nats.replicas", "service", name, "replicas", want, observability.Err(err))
	}
}

// NATSAuth is how the process authenticates to NATS (nats.credentials_file,
// nats.token_file) and secures the connection (nats.tls).
func (r *Runtime) NATSAuth() bus.Auth {
	t := r.Settings.NATS.TLS
	return bus.Auth{CredentialsFile: r.Settings.NATS.CredentialsFile, TokenFile: r.Settings.NATS.TokenFile, InProcess: r.NATSInProcess,
		TLS: bus.TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}}
}

// NATSAuthFor is NATSAuth for the connection of service (a base name such
// as bus.ServiceToolcall): its replies come to its own inbox prefix
// (Names.ServiceInbox) and, when the environment holds the service's
// password (config.NATSServicePasswordVar) and neither a credentials nor a
// token file is set, it connects as the service's own NATS user, named
// after the service (deploy/nats/accounts.conf).
func (r *Runtime) NATSAuthFor(service string) bus.Auth {
	a := r.NATSAuth()
	a.InboxPrefix = r.Names.ServiceInbox(service)
	if pw := r.Env.Get(config.NATSServicePasswordVar(service)); pw != "" && a.CredentialsFile == "" && a.TokenFile == "" {
		a.User, a.Password = service, pw
	}
	return a
}

// Close closes the NATS connection, once its buffered messages are out.
func (r *Runtime) Close() {
	if r.NC != nil {
		_ = r.NC.Drain()
		r.NC.Close()
		r.NC = nil
	}
}

// Share returns a runtime with the same configuration, environment, logger
// and replica id and no NATS connection, so each service of a dev process
// connects on its own like a separate process would.
func (r *Runtime) Share() *Runtime {
	return &Runtime{Settings: r.Settings, Extensions: r.Extensions, ExtensionsPath: r.ExtensionsPath, Env: r.Env,
		Log: r.Log, Names: r.Names, ReplicaID: r.ReplicaID, Metrics: r.MetricsRegistry(), NATSInProcess: r.NATSInProcess}
}
