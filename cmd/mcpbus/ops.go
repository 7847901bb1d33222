package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/redact"
)

func devNullLogger() *slog.Logger { return observability.Discard() }

// clientFlags are the flags of the operator verbs.
type clientFlags struct {
	natsURL   string
	namespace string
	config    string
	user      string
	thread    string
	timeout   time.Duration
	jsonOnly  bool
	// env is the process environment (main's, given to register).
	env config.Env
}

func (f *clientFlags) register(fs *flag.FlagSet, env config.Env) {
	f.env = env
	fs.StringVar(&f.natsURL, "nats-url", "", "NATS URL (default $MCPBUS_NATS_URL, then .mcpbus/nats.url of a dev process, then nats.url of config.yaml)")
	fs.StringVar(&f.config, "config", "", "config.yaml path")
	fs.StringVar(&f.namespace, "namespace", "", "deployment namespace (default $MCPBUS_NATS_NAMESPACE, then nats.namespace of config.yaml)")
	fs.StringVar(&f.user, "user", "", "user id")
	fs.StringVar(&f.thread, "thread", "", "thread id")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait for the reply")
	fs.BoolVar(&f.jsonOnly, "json", false, "print the raw JSON reply")
}

// resolveNATS finds the bus the operator means and how to authenticate:
// --nats-url, then $MCPBUS_NATS_URL, then .mcpbus/nats.url of a running
// dev process, then nats.url of config.yaml. The dev process's URL comes
// with its token (.mcpbus/nats.token); any other with config.yaml's
// nats.credentials_file and nats.token_file.
func (f *clientFlags) resolveNATS() (string, bus.Auth, error) {
	devURL := ""
	if b, err := os.ReadFile(devURLFile); err == nil {
		devURL = strings.TrimSpace(string(b))
	}
	u := f.natsURL
	if u == "" {
		u = f.env.Get(config.EnvNATSURL)
	}
	if u == "" {
		u = devURL
	}
	if u != "" && u == devURL {
		return u, bus.Auth{TokenFile: devTokenFile}, nil
	}
	s, err := f.settings()
	if err != nil {
		return "", bus.Auth{}, err
	}
	if u == "" {
		u = s.NATS.URL
	}
	return u, bus.Auth{CredentialsFile: s.NATS.CredentialsFile, TokenFile: s.NATS.TokenFile}, nil
}

// settings reads config.yaml (with the environment overrides).
func (f *clientFlags) settings() (*config.Settings, error) {
	p, explicit := config.FindSettingsPath(f.config, f.env)
	return config.LoadSettings(p, explicit, f.env)
}

// resolveNames finds the deployment namespace the operator means.
func (f *clientFlags) resolveNames() (bus.Names, error) {
	ns := f.namespace
	if ns == "" {
		s, err := f.settings()
		if err != nil {
			return bus.Names{}, err
		}
		ns = s.NATS.Namespace
	}
	names, err := bus.NewNames(ns)
	if err != nil {
		return bus.Names{}, fmt.Errorf("--namespace: %w", err)
	}
	return names, nil
}

// connect dials the bus and returns the deployment's names.
func (f *clientFlags) connect() (*nats.Conn, bus.Names, error) {
	names, err := f.resolveNames()
	if err != nil {
		return nil, names, err
	}
	url, auth, err := f.resolveNATS()
	if err != nil {
		return nil, names, err
	}
	opts, err := auth.Options()
	if err != nil {
		return nil, names, err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name("mcpbus-cli"))...)
	if err != nil {
		return nil, names, fmt.Errorf("connect to nats at %s: %w", redact.URL(url), err)
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
	req := bus.ToolsCallRequest{Tool: pos[0], UserID: f.user, ThreadID: f.thread}
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
	if _, err := parseArgs(fs, args); err != nil {
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
