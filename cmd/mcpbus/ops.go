package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/deployment"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/redact"
)

func devNullLogger() *slog.Logger { return observability.Discard() }

// clientFlags are the flags of the operator verbs.
type clientFlags struct {
	natsURL       string
	natsTokenFile string
	dir           string
	namespace     string
	config        string
	user          string
	thread        string
	timeout       time.Duration
	jsonOnly      bool
	// env is the process environment (main's, given to register).
	env config.Env
}

func (f *clientFlags) register(fs *flag.FlagSet, env config.Env) {
	f.env = env
	fs.StringVar(&f.natsURL, "nats-url", "", "NATS URL of the deployment (default $MCPBUS_NATS_URL, then a running dev process's .mcpbus/ found upward from the working directory, then nats.url of config.yaml)")
	fs.StringVar(&f.natsTokenFile, "nats-token-file", "", "file holding the NATS token (default $"+deployment.EnvTokenFile+", then nats.token_file of config.yaml; a dev directory brings its own)")
	fs.StringVar(&f.dir, "dir", "", "dev directory: the checkout `mcpbus dev` runs in, or its .mcpbus/ (takes the URL, token and namespace from there)")
	fs.StringVar(&f.config, "config", "", "config.yaml path")
	fs.StringVar(&f.namespace, "namespace", "", "deployment namespace (default $MCPBUS_NATS_NAMESPACE, then the dev directory's or nats.namespace of config.yaml)")
	fs.StringVar(&f.user, "user", "", "user id")
	fs.StringVar(&f.thread, "thread", "", "thread id")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for the reply")
	fs.BoolVar(&f.jsonOnly, "json", false, "print the raw JSON reply")
}

// connect finds the deployment (deployment.Find), says on stderr which one
// it is, dials it and returns its names.
func (f *clientFlags) connect() (*nats.Conn, bus.Names, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, bus.Names{}, fmt.Errorf("working directory: %w", err)
	}
	d, err := deployment.Find(deployment.Options{NATSURL: f.natsURL, TokenFile: f.natsTokenFile, Dir: f.dir,
		ConfigPath: f.config, Namespace: f.namespace, Env: f.env, WorkDir: wd})
	if err != nil {
		return nil, bus.Names{}, err
	}
	names, err := bus.NewNames(d.Namespace)
	if err != nil {
		return nil, names, fmt.Errorf("namespace: %w", err)
	}
	fmt.Fprintf(os.Stderr, "mcpbus: deployment %s\n", d)
	opts, err := d.Auth.Options()
	if err != nil {
		return nil, names, err
	}
	nc, err := nats.Connect(d.URL, append(opts, nats.Name("mcpbus-cli"))...)
	if err != nil {
		return nil, names, fmt.Errorf("connect to nats at %s (%s): %w", redact.URL(d.URL), d.Source, err)
	}
	return nc, names, nil
}

func cmdToolsList(args []string, env config.Env) error {
	fs := flag.NewFlagSet("tools list", flag.ContinueOnError)
	var f clientFlags
	f.register(fs, env)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	nc, names, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	reply, err := bus.ListCatalog(ctx, nc, names.ToolsList(), bus.ToolsListRequest{UserID: f.user, ThreadID: f.thread})
	if err != nil {
		return err
	}
	if f.jsonOnly {
		return printJSON(reply)
	}
	for _, t := range reply.Tools {
		fmt.Printf("%-32s %-16s %s\n", t.Name, t.Server, firstLine(t.Description))
	}
	for _, fsrv := range reply.FailedServers {
		fmt.Printf("failed server %s: %s\n", fsrv.Server, fsrv.Error)
	}
	return nil
}

func cmdCall(args []string, env config.Env) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	var f clientFlags
	f.register(fs, env)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return fmt.Errorf("usage: mcpbus call <tool> ['{\"json\":\"arguments\"}']")
	}
	req := bus.Call{Tool: pos[0], UserID: f.user, ThreadID: f.thread}
	if len(pos) == 2 {
		if !json.Valid([]byte(pos[1])) {
			return fmt.Errorf("arguments are not valid JSON")
		}
		req.Arguments = json.RawMessage(pos[1])
	}
	nc, names, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	reply, err := bus.Request[bus.ToolsCallReply](ctx, nc, names.ToolsCall(), req)
	if err != nil {
		return err
	}
	if f.jsonOnly {
		return printJSON(reply)
	}
	for _, c := range reply.Content {
		var block struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &block) == nil && block.Type == "text" {
			fmt.Println(block.Text)
		} else {
			fmt.Println(string(c))
		}
	}
	if reply.IsError {
		return fmt.Errorf("the tool reported an error")
	}
	return nil
}

func cmdCacheReset(args []string, env config.Env) error {
	fs := flag.NewFlagSet("cache reset", flag.ContinueOnError)
	var f clientFlags
	f.register(fs, env)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	nc, names, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	reply, err := bus.Request[bus.CacheResetReply](ctx, nc, names.CacheReset(), bus.CacheResetRequest{Reason: "cli"})
	if err != nil {
		return err
	}
	return printJSON(reply)
}

func cmdConfigValidate(args []string, env config.Env) int {
	fs := flag.NewFlagSet("config validate", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config.yaml path")
	extPath := fs.String("extensions-config", "", "extensions_config.json path")
	if _, err := parseArgs(fs, args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	ep, eExplicit := config.FindExtensionsPath(*extPath, env)
	sp, sExplicit := config.FindSettingsPath(*cfgPath, env)
	problems := config.ValidateFiles(ep, eExplicit, sp, sExplicit, env)
	bad := 0
	for _, p := range problems {
		fmt.Printf("%s: %s\n", p.Severity, p.String())
		if p.Severity == "error" {
			bad++
		}
	}
	if bad > 0 {
		fmt.Printf("%d error(s)\n", bad)
		return 1
	}
	fmt.Printf("ok: %s, %s\n", orNone(sp), orNone(ep))
	return 0
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
