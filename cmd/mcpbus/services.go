package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/api"
	"github.com/mcpbus/mcpbus/services/discovery"
	"github.com/mcpbus/mcpbus/services/taskpoller"
	"github.com/mcpbus/mcpbus/services/tokens"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// startOrder is the order dev mode starts services in (stopped in reverse).
var startOrder = []bootstrap.Spec{tokens.Spec, discovery.Spec, toolcall.Spec, taskpoller.Spec, api.Spec}

func specByName(name string) (bootstrap.Spec, bool) {
	for _, s := range startOrder {
		if s.Name == name {
			return s, true
		}
	}
	return bootstrap.Spec{}, false
}

func serviceNames() string {
	var names []string
	for _, s := range startOrder {
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

func cmdServe(args []string) error {
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
	spec, ok := specByName(pos[0])
	if !ok {
		return fmt.Errorf("unknown service %q; services: %s", pos[0], serviceNames())
	}
	ctx, stop := bootstrap.SignalContext()
	defer stop()
	if err := bootstrap.Serve(ctx, o, spec); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func cmdMigrate(args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	var o bootstrap.Options
	o.Register(fs)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	rt, err := bootstrap.Load(o, os.Stderr)
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
