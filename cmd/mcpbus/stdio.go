package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// cmdStdio serves the aggregated MCP server on stdin/stdout for one user
// and thread, forwarding to a deployment over NATS: for desktop clients
// whose config can only start a process. Stdout carries MCP only; nothing
// is logged there.
func cmdStdio(args []string, env config.Env) error {
	fs := flag.NewFlagSet("stdio", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var f clientFlags
	f.register(fs, env)
	set := fs.String("virtual", "", "serve this virtual server's view of the catalog (docs/virtual-servers.md)")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	nc, names, err := f.connect()
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	// tool_search promotions are shared with the api replicas through the
	// bucket the api creates; without it (no api yet) tool_search is not
	// offered.
	var promotions jetstream.KeyValue
	if js, err := jetstream.New(nc); err == nil {
		kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		promotions, _ = js.KeyValue(kctx, names.MCPPromotionsBucket())
		cancel()
	}
	srv, err := mcpserver.New(mcpserver.Config{Name: "mcpbus", RequestTimeout: f.timeout}, mcpserver.Deps{NC: nc, Names: names, Promotions: promotions})
	if err != nil {
		return err
	}
	ctx, stop := bootstrap.SignalContext()
	defer stop()
	return srv.ServeStdio(ctx, os.Stdin, os.Stdout, mcpserver.Exchange{
		UserID:        cmp.Or(f.user, f.env.Get(config.EnvUser), "default"),
		ThreadHeader:  cmp.Or(f.thread, f.env.Get(config.EnvThread), "default"),
		VirtualServer: *set,
	})
}
