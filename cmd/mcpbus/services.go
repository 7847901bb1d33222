package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/mcpbus/mcpbus/cmd/mcpbus/internal/wiring"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
)

func serviceNames() string {
	var names []string
	for _, s := range wiring.Order {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseArgs parses flags that may come before, between or after positional
// arguments, and returns the positionals.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func cmdServe(args []string, env config.Env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var o bootstrap.Options
	o.Register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("name one service: %s", serviceNames())
	}
	svc, ok := wiring.ByName(pos[0])
	if !ok {
		return fmt.Errorf("unknown service %q; services: %s", pos[0], serviceNames())
	}
	ctx, stop := bootstrap.SignalContext()
	defer stop()
	rt, err := bootstrap.Load(o, env, bootstrap.Stderr)
	if err != nil {
		return err
	}
	stopProcess, err := rt.StartProcess(ctx, svc.Name)
	if err != nil {
		return err
	}
	defer stopProcess()
	if err := wiring.Serve(ctx, rt, svc, nil); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func cmdMigrate(args []string, env config.Env) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	var o bootstrap.Options
	o.Register(fs)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	rt, err := bootstrap.Load(o, env, os.Stderr)
	if err != nil {
		return err
	}
	applied, err := backends.Migrate(context.Background(), rt.Settings.Database, rt.Log)
	if err != nil {
		return err
	}
	fmt.Printf("migrated %s database: %d migration(s) applied\n", rt.Settings.Database.Backend, len(applied))
	for _, a := range applied {
		fmt.Println("  " + a)
	}
	return nil
}
