package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/deployment"
	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/wiring"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
)

// devDir holds dev mode's data: JetStream, SQLite, workspaces, and while
// it runs what the operator commands find it by (deployment.Find).
const devDir = deployment.StateDir

var (
	// devURLFile is where dev mode writes its NATS URL.
	devURLFile = filepath.Join(devDir, deployment.URLFile)
	// devTokenFile is where dev mode writes the embedded server's token
	// (mode 0600): a new random one each start; clients without it are
	// refused.
	devTokenFile = filepath.Join(devDir, deployment.TokenFile)
	// devNamespaceFile is where dev mode writes its nats.namespace.
	devNamespaceFile = filepath.Join(devDir, deployment.NamespaceFile)
)

func cmdDev(args []string, env config.Env) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	var o bootstrap.Options
	o.Register(fs)
	natsPort := fs.Int("nats-port", bus.DevPort, "port of the embedded NATS server (-1 picks a free one; make run: NATS_PORT)")
	apiListen := fs.String("api-listen", "", "host:port of the REST API and /mcp (overrides api.listen and $MCPBUS_API_LISTEN; make run: API_ADDR)")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	ctx, stop := bootstrap.SignalContext()
	defer stop()

	rt, err := bootstrap.Load(o, env, os.Stderr)
	if err != nil {
		return err
	}
	if *apiListen != "" {
		rt.Settings.API.Listen = *apiListen
	}
	// Before any service spawns a stdio child: what a killed dev run left
	// running dies now.
	rt.TrackChildren()
	stopTracing, err := rt.StartTracing(ctx, "dev")
	if err != nil {
		return err
	}
	defer rt.StopTracing(stopTracing)
	// One registry for all five services: the api's /metrics shows them
	// all, and so does --metrics-listen when given.
	stopMetrics, err := rt.ServeMetrics(o.MetricsListen)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if err := os.MkdirAll(devDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", devDir, err)
	}
	if rt.Settings.PersonalConnections.Stdio && os.Geteuid() == 0 {
		// Personal stdio children run under uids of their own and
		// must reach their workspace under .mcpbus/workspace: the directory
		// becomes searchable but not listable; what it holds stays private
		// (the database 0600, nats/ 0750, nats.url 0600).
		if err := os.Chmod(devDir, 0o711); err != nil {
			return fmt.Errorf("make %s searchable: %w", devDir, err)
		}
	}
	// Dev mode keeps its data in SQLite unless config.yaml names a
	// backend: an explicit memory backend is honoured, and said loudly.
	switch db := &rt.Settings.Database; {
	case db.Backend == config.BackendMemory && db.BackendSet:
		rt.Log.Warn("dev mode uses the memory database as config.yaml says: personal connections and OAuth tokens are lost when it stops, and durable tasks are unavailable",
			"settings", rt.Settings.Path)
	case db.Backend != config.BackendPostgres:
		db.Backend = config.BackendSQLite
	}
	token, err := bus.NewToken()
	if err != nil {
		return err
	}
	if err := writePrivate(devTokenFile, token+"\n"); err != nil {
		return err
	}
	defer os.Remove(devTokenFile)
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: *natsPort, StoreDir: filepath.Join(devDir, "nats"), Token: token})
	if err != nil {
		return portInUse(err, strconv.Itoa(*natsPort), "NATS_PORT (make run) or --nats-port")
	}
	defer ns.Shutdown()
	rt.Settings.NATS.URL = ns.URL()
	rt.Settings.NATS.CredentialsFile, rt.Settings.NATS.TokenFile = "", devTokenFile
	// The services reach the server through in-memory pipes: no loopback
	// socket, no write(2)/read(2) per message and hop. The operator
	// commands and agent workers use the URL.
	rt.NATSInProcess = ns.InProcess()
	if err := os.WriteFile(devNamespaceFile, []byte(rt.Names.Namespace()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", devNamespaceFile, err)
	}
	defer os.Remove(devNamespaceFile)
	// nats.url last: the operator commands take its presence for a
	// running dev process.
	if err := os.WriteFile(devURLFile, []byte(ns.URL()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", devURLFile, err)
	}
	defer os.Remove(devURLFile)
	db, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
	if err != nil {
		return err
	}
	defer db.Close()

	// Each service gets its own connection, as separate processes would,
	// and starts once the one it depends on is ready.
	group, err := wiring.Start(ctx, rt, db, wiring.Order, wiring.Hooks{
		Started:  func(name string) { fmt.Printf("mcpbus dev: %s started\n", name) },
		Stopping: func(name string) { fmt.Printf("mcpbus dev: stopping %s\n", name) },
		Stopped:  func(name string) { fmt.Printf("mcpbus dev: %s stopped\n", name) },
	})
	if err != nil {
		return portInUse(err, rt.Settings.API.Listen, "API_ADDR (make run) or --api-listen")
	}
	dbWhere := rt.Settings.Database.Path
	switch rt.Settings.Database.Backend {
	case config.BackendPostgres:
		dbWhere = "postgres"
	case config.BackendMemory:
		dbWhere = "(in this process only: nothing is kept when it stops)"
	}
	fmt.Printf("mcpbus dev is running\n  services:   tokens, discovery, toolcall, taskpoller, api\n  NATS:       %s (JetStream data in %s)\n  database:   %s %s\n  config:     %s, %s\n  API:        http://%s\n  try:        curl -s http://%s/api/mcp/tools\n  stop:       Ctrl-C\n",
		ns.URL(), filepath.Join(devDir, "nats"), rt.Settings.Database.Backend, dbWhere,
		orNone(rt.Settings.Path), orNone(rt.ExtensionsPath), rt.Settings.API.Listen, rt.Settings.API.Listen)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-group.Failed():
		runErr = portInUse(runErr, rt.Settings.API.Listen, "API_ADDR (make run) or --api-listen")
	}
	// In reverse dependency order, each drained before the next stops:
	// the api stops taking requests first, tokens goes last.
	fmt.Println("mcpbus dev: stopping")
	return errors.Join(runErr, group.Stop())
}

// writePrivate writes content to a new file only its owner can read,
// replacing any file of that name (whatever its mode was).
func writePrivate(path, content string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// portInUse names the port and what moves it when err is a listen on a
// taken port (EADDRINUSE); any other error is returned as it is. where is
// a port or host:port.
func portInUse(err error, where, moveWith string) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	if _, port, splitErr := net.SplitHostPort(where); splitErr == nil {
		where = port
	}
	return fmt.Errorf("port %s is in use; set %s: %w", where, moveWith, err)
}

func orNone(p string) string {
	if p == "" {
		return "(defaults)"
	}
	return p
}
