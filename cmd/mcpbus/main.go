// Command mcpbus is the one mcpbus binary: `mcpbus dev` runs the whole
// system in one process on embedded NATS and SQLite, `mcpbus serve <service>`
// runs one service against an external NATS and PostgreSQL, `mcpbus migrate`
// applies the database migrations, and the operator verbs (`tools list`,
// `call`, `cache reset`, `config validate`) talk to a running deployment
// over NATS.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/config"
)

const usage = `mcpbus: an MCP tool gateway over NATS

Usage:
  mcpbus dev [flags]                      all five services, embedded NATS and SQLite (data under .mcpbus/)
  mcpbus serve <service> [flags]          one service: discovery, toolcall, taskpoller, tokens, api
  mcpbus migrate [flags]                  apply database migrations (once per release; see database.auto_migrate)
  mcpbus tools list [flags]               list the catalog over NATS
  mcpbus call <tool> [json-args] [flags]  call a tool over NATS
  mcpbus cache reset [flags]              reset every replica's tool cache
  mcpbus config validate [flags]          check config.yaml and extensions_config.json
  mcpbus keygen                           print a new MCPBUS_CREDENTIALS_KEY (base64 of 32 random bytes)
  mcpbus stdio [--user u] [--thread t] [--virtual name]  serve the caller's catalog as an MCP server on stdin/stdout, over NATS
  mcpbus audit tail [--user U] [--tool T] [--follow]  the newest audit records (tool calls, config changes)

Common flags: --config, --extensions-config, --nats-url, --database-url (serve: --metrics-listen;
dev: --nats-port, --api-listen)

The operator commands (tools list, call, cache reset, audit tail, stdio) find their
deployment by --dir (a dev checkout or its .mcpbus/), or --nats-url with --nats-token-file
($MCPBUS_NATS_URL, $MCPBUS_NATS_TOKEN_FILE), or a running dev process's .mcpbus/ found
upward from the working directory, or nats.url of config.yaml; they say on stderr which
one they use and never fall back to a default URL. -h after any command lists its flags.
`

func main() {
	// Orphaned descendants of stdio servers (dev and serve toolcall) are
	// re-parented to this process, which reaps them when it kills their
	// process group.
	bootstrap.EnableSubreaper()
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	// `mcpbus <verb> -h` of a two-word verb (tools list, cache reset,
	// config validate, audit tail) or of keygen is help, not a usage error.
	if len(args) == 2 && slices.Contains([]string{"tools", "cache", "config", "audit", "keygen"}, args[0]) && isHelp(args[1]) {
		fmt.Print(usage)
		return 0
	}
	// The one read of the environment; every command gets it from here.
	env := config.ReadEnv()
	var err error
	switch args[0] {
	case "dev":
		err = cmdDev(args[1:], env)
	case "serve":
		err = cmdServe(args[1:], env)
	case "migrate":
		err = cmdMigrate(args[1:], env)
	case "tools":
		if len(args) < 2 || args[1] != "list" {
			fmt.Fprint(os.Stderr, "usage: mcpbus tools list [flags]\n")
			return 2
		}
		err = cmdToolsList(args[2:], env)
	case "call":
		err = cmdCall(args[1:], env)
	case "cache":
		if len(args) < 2 || args[1] != "reset" {
			fmt.Fprint(os.Stderr, "usage: mcpbus cache reset [flags]\n")
			return 2
		}
		err = cmdCacheReset(args[2:], env)
	case "config":
		if len(args) < 2 || args[1] != "validate" {
			fmt.Fprint(os.Stderr, "usage: mcpbus config validate [flags]\n")
			return 2
		}
		return cmdConfigValidate(args[2:], env)
	case "stdio":
		err = cmdStdio(args[1:], env)
	case "audit":
		err = cmdAudit(args[1:], env)
	case "conformance-client":
		// Hidden: the client under test of the conformance suite's client
		// leg (conformance/run.sh).
		err = cmdConformanceClient(args[1:], env)
	case "keygen":
		err = cmdKeygen(args[1:], os.Stdout)
	case "help", "-h", "--help", "-help":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "mcpbus: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0 // the flag package printed the command's flags
	case err != nil:
		fmt.Fprintf(os.Stderr, "mcpbus %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}
