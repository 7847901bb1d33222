package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

var (
	// demoBin is the demo server binary built by TestMain.
	demoBin string
)

func TestMain(m *testing.M) {
	if os.Getenv(metaFakeEnv) == "1" {
		serveMetaFake() // this binary re-executed as a stdio server
		return
	}
	if os.Getenv(hugeFakeEnv) == "1" {
		serveHugeFake()
		return
	}
	if dir := os.Getenv(gatewayHelperEnv); dir != "" {
		runGatewayHelper(dir)
		return
	}
	if os.Getenv(isolationHelperEnv) == "1" {
		printIsolation()
		return
	}
	if os.Getenv(rawFakeEnv) == "1" {
		serveRawFake()
		return
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "mcpclient-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// Searchable by the unprivileged uid of the RunAs tests.
	if err := os.Chmod(tmp, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	demoBin = filepath.Join(tmp, "demoserver")
	build := exec.Command("go", "build", "-o", demoBin, "github.com/mcpbus/mcpbus/examples/demoserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the demo server:", err)
		return 1
	}

	// Orphaned grandchildren of stdio servers are re-parented to the test
	// process, so Close can reap them and the tests can see them gone even
	// where PID 1 does not reap.
	if err := mcpclient.EnableSubreaper(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintln(os.Stderr, "enabling subreaper:", err)
		return 1
	}
	return m.Run()
}

// testLogger logs through t until the test ends.
func testLogger(t *testing.T) *slog.Logger { return testkit.Logger(t) }

// connect connects with a 30 s setup bound and closes the client when the
// test ends.
func connect(t *testing.T, spec mcpclient.Spec) *mcpclient.Client {
	t.Helper()
	if spec.Logger == nil {
		spec.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, spec)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// call calls a tool with a 30 s deadline and fails the test on error.
func call(t *testing.T, c *mcpclient.Client, name, args string, headers map[string]string) *mcpclient.CallResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var raw json.RawMessage
	if args != "" {
		raw = json.RawMessage(args)
	}
	res, err := c.CallTool(ctx, name, raw, &mcpclient.CallOptions{Headers: headers})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

// text returns the text of the first content block, failing unless it is a
// text block.
func text(t *testing.T, res *mcpclient.CallResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("no content blocks")
	}
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(res.Content[0], &b); err != nil {
		t.Fatalf("content block %s: %v", res.Content[0], err)
	}
	if b.Type != "text" {
		t.Fatalf("content block type %q, want text: %s", b.Type, res.Content[0])
	}
	return b.Text
}

// identity is the demo whoami tool's structured content.
type identity struct {
	Headers map[string]string `json:"headers"`
	Cwd     string            `json:"cwd"`
	TmpDir  string            `json:"tmpdir"`
	Pid     int               `json:"pid"`
}

func whoami(t *testing.T, c *mcpclient.Client, headers map[string]string) identity {
	t.Helper()
	res := call(t, c, "whoami", "", headers)
	var id identity
	if err := json.Unmarshal(res.StructuredContent, &id); err != nil {
		t.Fatalf("whoami structured content %s: %v", res.StructuredContent, err)
	}
	return id
}

func toolNames(tools []mcpclient.Tool) []string {
	names := make([]string, len(tools))
	for i, tl := range tools {
		names[i] = tl.Name
	}
	return names
}

func listTools(t *testing.T, c *mcpclient.Client) []mcpclient.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	return tools
}

func findTool(t *testing.T, tools []mcpclient.Tool, name string) mcpclient.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("tool %q not in %v", name, toolNames(tools))
	return mcpclient.Tool{}
}
