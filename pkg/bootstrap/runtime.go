package bootstrap

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/redact"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
)

// Options are the flags every process takes.
type Options struct {
	ConfigPath     string
	ExtensionsPath string
	NATSURL        string
	DatabaseURL    string
}

// Register adds the flags to fs.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigPath, "config", "", "config.yaml path (default $MCPBUS_CONFIG, then ./config.yaml)")
	fs.StringVar(&o.ExtensionsPath, "extensions-config", "", "extensions_config.json path (default $MCPBUS_EXTENSIONS_CONFIG, $DEER_FLOW_EXTENSIONS_CONFIG_PATH, then ./extensions_config.json)")
	fs.StringVar(&o.NATSURL, "nats-url", "", "NATS URL (overrides nats.url)")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "PostgreSQL URL (overrides database.url and selects the postgres backend)")
}

// Runtime is what a process has once wired.
type Runtime struct {
	Settings       *config.Settings
	Extensions     *config.Extensions
	ExtensionsPath string
	Log            *slog.Logger

	NC    *nats.Conn
	JS    jetstream.JetStream
	KV    jetstream.KeyValue
	Store store.Store

	ownStore bool
}

// Load reads both configuration files and builds the logger (to w).
func Load(o Options, w io.Writer) (*Runtime, error) {
	sp, sExplicit := config.FindSettingsPath(o.ConfigPath)
	settings, err := config.LoadSettings(sp, sExplicit)
	if err != nil {
		return nil, err
	}
	if o.NATSURL != "" {
		settings.NATS.URL = o.NATSURL
	}
	if o.DatabaseURL != "" {
		settings.Database.Backend, settings.Database.URL = config.BackendPostgres, o.DatabaseURL
	}
	log := observability.NewLogger(w, settings.Log.Level, settings.Log.Format)
	ep, eExplicit := config.FindExtensionsPath(o.ExtensionsPath)
	ext, err := config.LoadExtensions(ep, eExplicit)
	if err != nil {
		return nil, err
	}
	for _, p := range ext.Problems {
		log.Warn("extensions config problem", "problem", p.String())
	}
	return &Runtime{Settings: settings, Extensions: ext, ExtensionsPath: ext.Path, Log: log}, nil
}

// ConnectNATS dials NATS and sets up the KV bucket and events stream.
func (r *Runtime) ConnectNATS(ctx context.Context, name string) error {
	nc, err := bus.Connect(r.Settings.NATS.URL, name, r.Settings.NATS.CredentialsFile, r.Log)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("jetstream: %w", err)
	}
	kv, err := bus.JetStreamSetup(ctx, js, r.Settings.NATS.Replicas)
	if err != nil {
		nc.Close()
		return fmt.Errorf("nats at %s: %w (is JetStream enabled, on at least nats.replicas = %d servers?)", redact.URL(r.Settings.NATS.URL), err, r.Settings.NATS.Replicas)
	}
	r.NC, r.JS, r.KV = nc, js, kv
	return nil
}

// OpenStore migrates (when asked) and opens the database.
func (r *Runtime) OpenStore(ctx context.Context, migrate bool) error {
	if r.Store != nil {
		return nil // shared (dev mode): opened and migrated by the owner
	}
	if migrate {
		if _, err := backends.Migrate(ctx, r.Settings.Database, r.Log); err != nil {
			return err
		}
	}
	st, err := backends.Open(ctx, r.Settings.Database, r.Log)
	if err != nil {
		return err
	}
	r.Store, r.ownStore = st, true
	return nil
}

// Close releases the connection and the database.
func (r *Runtime) Close() error {
	var errs []error
	if r.NC != nil {
		r.NC.Close()
	}
	if r.Store != nil && r.ownStore {
		errs = append(errs, r.Store.Close())
	}
	return errors.Join(errs...)
}

// Stderr is the default log destination.
var Stderr io.Writer = os.Stderr

// Share returns a runtime with the same configuration, logger and database
// (not owned: the caller closes it) and no NATS connection, so each service
// of a dev process connects on its own like a separate process would.
func (r *Runtime) Share() *Runtime {
	return &Runtime{Settings: r.Settings, Extensions: r.Extensions, ExtensionsPath: r.ExtensionsPath, Log: r.Log, Store: r.Store}
}

// CloseStore closes a database this runtime opened.
func (r *Runtime) CloseStore() error {
	if r.Store == nil || !r.ownStore {
		return nil
	}
	return r.Store.Close()
}
