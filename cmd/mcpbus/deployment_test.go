package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// cleanCLIEnv is the environment without any variable that names a
// deployment, as a desktop client starts its MCP servers.
func cleanCLIEnv(extra ...string) []string {
	return append(append(os.Environ(), "MCPBUS_NATS_URL=", "MCPBUS_CONFIG=", "MCPBUS_NATS_NAMESPACE=", "MCPBUS_NATS_TOKEN_FILE="), extra...)
}

// runCLI runs mcpbus with args in dir and returns stdout, stderr and
// whether it exited 0.
func runCLI(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(mcpbusBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("run mcpbus %v: %v", args, err)
	}
	return out.String(), errOut.String(), err == nil
}

// TestStdioAndCLIFromAnotherDirectory is a Claude Desktop / Cursor config
// ({"command": "<abs>/mcpbus", "args": ["stdio", "--dir", "<abs checkout>"]})
// and the CLI run from a directory that is not the dev checkout: they reach
// the dev deployment (its URL, token and namespace) and say on stderr which
// one they use.
func TestStdioAndCLIFromAnotherDirectory(t *testing.T) {
	t.Parallel()
	ns := testkit.RandomNames(t).Namespace()
	dir, _, _ := startDev(t, "nats:\n  namespace: "+ns+"\n")
	elsewhere := t.TempDir()

	inElsewhere := transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Dir, cmd.Env = elsewhere, cleanCLIEnv(env...)
		return cmd, nil
	})
	c := client.NewClient(transport.NewStdioWithOptions(mcpbusBin, nil, []string{"stdio", "--dir", dir}, inElsewhere),
		client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	initialized(t, c, mcp.ProtocolVersion20251125)
	if names := listedNames(t, c); !slices.Contains(names, "demo_add") {
		t.Fatalf("mcpbus stdio --dir listed %v", names)
	}
	if text, isErr := callText(t, c, "demo_add", map[string]any{"a": 2, "b": 5}); isErr || text != "7" {
		t.Fatalf("mcpbus stdio --dir call: %q %v", text, isErr)
	}

	state := filepath.Join(dir, ".mcpbus")
	out, errOut, ok := runCLI(t, elsewhere, cleanCLIEnv(), "call", "demo_add", `{"a":1,"b":2}`, "--dir", state)
	if !ok || strings.TrimSpace(out) != "3" {
		t.Fatalf("mcpbus call --dir %s: %q %s", state, out, errOut)
	}
	if !strings.Contains(errOut, "deployment NATS nats://127.0.0.1:") || !strings.Contains(errOut, "namespace "+ns) || !strings.Contains(errOut, state) {
		t.Errorf("mcpbus call --dir does not say which deployment it uses: %q", errOut)
	}

	// A URL with the token file (flag or environment) and the namespace.
	url := devNATSURL(t, dir)
	token := filepath.Join(state, "nats.token")
	out, errOut, ok = runCLI(t, elsewhere, cleanCLIEnv("MCPBUS_NATS_TOKEN_FILE="+token), "tools", "list", "--nats-url", url, "--namespace", ns)
	if !ok || !strings.Contains(out, "demo_add") {
		t.Fatalf("mcpbus tools list --nats-url with $MCPBUS_NATS_TOKEN_FILE: %q %s", out, errOut)
	}
	out, errOut, ok = runCLI(t, elsewhere, cleanCLIEnv(), "tools", "list", "--nats-url", url, "--nats-token-file", token, "--namespace", ns)
	if !ok || !strings.Contains(out, "demo_add") {
		t.Fatalf("mcpbus tools list --nats-url --nats-token-file: %q %s", out, errOut)
	}
	if strings.Contains(errOut, readToken(t, token)) {
		t.Errorf("the token is printed: %q", errOut)
	}

	// Without them, the server refuses: the token is not guessed.
	if _, errOut, ok := runCLI(t, elsewhere, cleanCLIEnv(), "tools", "list", "--nats-url", url, "--namespace", ns); ok || !strings.Contains(errOut, "Authorization") {
		t.Errorf("--nats-url without a token file: ok=%v %q", ok, errOut)
	}
}

// TestCLIWithoutADeploymentNamesWhatToSet: run where no dev process is
// found and nothing names a NATS URL, every operator command fails naming
// the flags and variables to set, and connects nowhere (no default URL).
func TestCLIWithoutADeploymentNamesWhatToSet(t *testing.T) {
	t.Parallel()
	elsewhere := t.TempDir()
	for _, args := range [][]string{
		{"tools", "list"},
		{"call", "demo_add", `{"a":1,"b":2}`},
		{"cache", "reset"},
		{"audit", "tail"},
		{"stdio"},
	} {
		out, errOut, ok := runCLI(t, elsewhere, cleanCLIEnv(), args...)
		if ok {
			t.Errorf("mcpbus %v succeeded without a deployment: %q %q", args, out, errOut)
			continue
		}
		for _, want := range []string{"no mcpbus deployment found", "--dir", "--nats-url", "--nats-token-file", "MCPBUS_NATS_URL", "MCPBUS_NATS_TOKEN_FILE"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("mcpbus %v: error lacks %q: %q", args, want, errOut)
			}
		}
		if out != "" {
			t.Errorf("mcpbus %v printed %q", args, out)
		}
	}

	// A --dir where no dev process runs names the flag and the directory.
	empty := t.TempDir()
	_, errOut, ok := runCLI(t, elsewhere, cleanCLIEnv(), "tools", "list", "--dir", empty)
	if ok || !strings.Contains(errOut, "--dir "+empty) || !strings.Contains(errOut, "no running `mcpbus dev`") {
		t.Errorf("--dir without a dev process: ok=%v %q", ok, errOut)
	}
}
