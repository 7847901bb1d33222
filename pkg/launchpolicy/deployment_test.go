package launchpolicy

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// policyServer parses one entry named "s".
func policyServer(t *testing.T, entry string) *config.Server {
	t.Helper()
	ext, err := config.ParseExtensions("ext.json", []byte(`{"mcpServers": {"s": `+entry+`}}`))
	if err != nil {
		t.Fatalf("ParseExtensions: %v", err)
	}
	if len(ext.Servers) != 1 {
		t.Fatalf("entry %s did not parse: %v", entry, ext.Problems)
	}
	return ext.Servers[0]
}

func TestDeployment(t *testing.T) {
	t.Setenv("MCPBUS_TEST_ARG", "--eval")
	t.Setenv("MCPBUS_TEST_CMD", "npx")
	p := NewDeployment([]string{"node", "python3"})
	const allowed = "Allowed commands: node, npx, python3, uvx."
	for _, tc := range []struct {
		entry, field, value, msg string
	}{
		// Accepted.
		{entry: `{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}`},
		{entry: `{"command": "npx", "args": ["--yes", "--package", "pkg", "pkg-bin", "-c", "x"]}`}, // -c after the first positional is the server's
		{entry: `{"command": "npx", "args": ["-p", "-c", "pkg"]}`},                                 // -p (--package) consumes "-c" as its value
		{entry: `{"command": "npx", "args": ["--registry", "--eval", "pkg"]}`},                     // an unknown option consumes a value
		{entry: `{"command": "npx", "args": ["--", "--eval"]}`},                                    // "--" ends the region
		{entry: `{"command": "npx", "args": ["-", "-c"]}`},                                         // "-" ends the region
		{entry: `{"command": "uvx", "args": ["-c", "constraints.txt", "mcp-server-fetch"]}`},       // uvx -c takes a value
		{entry: `{"command": "uvx", "args": ["-p", "3.12", "-e", "mcp-server"]}`},                  // short exec spellings are not uvx's
		{entry: `{"command": "uvx", "args": ["--from", "pkg", "--eval", "x"]}`},                    // unknown options consume nothing: "pkg" is positional
		{entry: `{"command": "node", "args": ["server.js", "-C", "x"]}`},                           // short flags are case-sensitive
		{entry: `{"command": "npx", "env": {"NODE_PATH": "/x", "LD_LIBRARY_PATH": "/l", "DYLD_LIBRARY_PATH": "/d"}}`},
		{entry: `{"type": "http", "url": "http://u", "command": "bash"}`}, // non-stdio servers skip the policy
		{entry: `{"command": "python3", "args": ["-m", "server"]}`},
		// Command.
		{entry: `{"command": "/usr/bin/npx"}`, field: "command", value: "/usr/bin/npx", msg: "MCP server 's' command must be a single executable name; put parameters in args instead."},
		{entry: `{"command": "npx -y pkg"}`, field: "command", msg: "command must be a single executable name"},
		{entry: `{"command": " npx"}`, field: "command", msg: "command must be a single executable name"},
		{entry: `{"command": "npx;rm"}`, field: "command", msg: "command must be a single executable name"},
		{entry: `{"command": "..\\npx"}`, field: "command", msg: "command must be a single executable name"},
		{entry: `{"command": "$MCPBUS_TEST_CMD"}`, field: "command", msg: "command must be a single executable name"},
		{entry: `{"command": "np` + "`" + `x"}`, field: "command", msg: "command must be a single executable name"},
		{entry: `{"command": "bash", "args": ["server.sh"]}`, field: "command", value: "bash",
			msg: "MCP server 's' uses disallowed stdio command 'bash'. " + allowed + " Configure MCPBUS_STDIO_COMMAND_ALLOWLIST to extend this list."},
		// Flags.
		{entry: `{"command": "npx", "args": ["-c", "echo pwned"]}`, field: "args", value: "-c",
			msg: "MCP server 's' passes '-c' to 'npx', which would run arbitrary code. Point the server at a package or module instead."},
		{entry: `{"command": "npx", "args": ["--call=echo pwned"]}`, field: "args", value: "--call"},
		{entry: `{"command": "npx", "args": ["-y", "--Node-Options", "--require x"]}`, field: "args", value: "--Node-Options"},
		{entry: `{"command": "npx", "args": ["--shell", "sh", "pkg"]}`, field: "args", value: "--shell"},
		{entry: `{"command": "npx", "args": ["-yc", "echo pwned"]}`, field: "args", value: "-c"},
		{entry: `{"command": "uvx", "args": ["--eval", "x"]}`, field: "args", value: "--eval"},
		{entry: `{"command": "uvx", "args": ["-c", "c.txt", "--PRINT=x"]}`, field: "args", value: "--PRINT"},
		{entry: `{"command": "node", "args": ["-e", "process.exit()"]}`, field: "args", value: "-e"},
		{entry: `{"command": "node", "args": ["server.js", "-p", "1"]}`, field: "args", value: "-p"},
		{entry: `{"command": "node", "args": ["-pe", "1"]}`, field: "args", value: "-p"},
		{entry: `{"command": "python3", "args": ["-c", "import os"]}`, field: "args", value: "-c"},
		{entry: `{"command": "node", "args": ["--eval=1"]}`, field: "args", value: "--eval"},
		{entry: `{"command": "node", "args": ["--node-arg", "x"]}`, field: "args", value: "--node-arg"},
		{entry: `{"command": "node", "args": ["--print", "x"]}`, field: "args", value: "--print"},
		{entry: `{"command": "node", "args": ["$MCPBUS_TEST_ARG", "x"]}`, field: "args", value: "--eval"}, // expanded args are checked too
		// Environment.
		{entry: `{"command": "npx", "env": {"NODE_OPTIONS": "--require x"}}`, field: "env", value: "NODE_OPTIONS",
			msg: "MCP server 's' sets environment variable 'NODE_OPTIONS', which would run arbitrary code at process startup."},
		{entry: `{"command": "npx", "env": {" ld_preload ": "x"}}`, field: "env", value: " ld_preload "},
		{entry: `{"command": "uvx", "env": {"PYTHONPATH": "/x"}}`, field: "env", value: "PYTHONPATH"},
		{entry: `{"command": "uvx", "env": {"BASH_ENV": "/x"}}`, field: "env", value: "BASH_ENV"},
		{entry: `{"command": "npx", "env": {"PATH": "/home/eve/bin"}}`, field: "env", value: "PATH",
			msg: "MCP server 's' sets environment variable 'PATH', which would change which program 'npx' runs."},
	} {
		err := p.Check(policyServer(t, tc.entry))
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.entry, err)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: got %v, want a refusal of %s", tc.entry, err, tc.field)
			continue
		}
		if pe.Server != "s" || pe.Field != tc.field || (tc.value != "" && pe.Value != tc.value) {
			t.Errorf("%s: refusal %+v, want field %s value %q", tc.entry, pe, tc.field, tc.value)
		}
		if tc.msg != "" && !strings.Contains(pe.Message, tc.msg) {
			t.Errorf("%s: message %q, want %q", tc.entry, pe.Message, tc.msg)
		}
	}
}

func TestDeploymentCommandRequired(t *testing.T) {
	t.Parallel()
	// The parser refuses a stdio server without a command; the policy says
	// so on its own too (personal connections check it before parsing).
	err := NewDeployment(nil).CheckStdio("s", "", nil, nil)
	var pe *Error
	if !errors.As(err, &pe) || pe.Message != "MCP server 's' with stdio transport requires a command." {
		t.Fatalf("got %v", err)
	}
}
