package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// metaFakeEnv re-executes the test binary as a stdio server whose "meta"
// tool returns the _meta of the request it got.
const metaFakeEnv = "MCPCLIENT_META_FAKE"

func serveMetaFake() {
	s := server.NewMCPServer("meta", "1.0.0")
	s.AddTool(mcp.NewTool("meta"), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out := map[string]any{}
		if r.Params.Meta != nil {
			out = r.Params.Meta.AdditionalFields
		}
		return mcp.NewToolResultStructuredOnly(out), nil
	})
	// "block" waits until its request is cancelled; "cancelled" reports how
	// many blocked calls saw their context end.
	var cancelled atomic.Int64
	s.AddTool(mcp.NewTool("block"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			cancelled.Add(1)
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return mcp.NewToolResultText("not cancelled"), nil
		}
	})
	s.AddTool(mcp.NewTool("cancelled"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(strconv.FormatInt(cancelled.Load(), 10)), nil
	})
	if err := server.ServeStdio(s); err != nil {
		os.Exit(1)
	}
}

func metaClient(t *testing.T) *mcpclient.Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return connect(t, mcpclient.Spec{Server: "meta", Command: exe, Env: map[string]string{metaFakeEnv: "1"}})
}

// onlyProtocolMeta fails unless the _meta the meta fake echoed holds
// nothing of the caller's: nothing at all in the legacy era, only the
// protocol's own fields in the modern one.
func onlyProtocolMeta(t *testing.T, what string, meta json.RawMessage) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(meta, &fields); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			t.Errorf("%s sent _meta %s, with %q", what, meta, k)
		}
	}
}

func TestStdioHeadersTravelAsMeta(t *testing.T) {
	t.Parallel()
	c := metaClient(t)
	res := call(t, c, "meta", "", map[string]string{"X-Trace": "abc", "Authorization": "Bearer t"})
	var meta struct {
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(res.StructuredContent, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Headers["X-Trace"] != "abc" || meta.Headers["Authorization"] != "Bearer t" || len(meta.Headers) != 2 {
		t.Errorf("_meta.headers = %v", meta.Headers)
	}
	// Without headers _meta holds no headers: nothing at all in the legacy
	// era, only the protocol's own fields in the modern one (which era the
	// fake is spoken to in depends on the per-origin era cache, which other
	// tests of this package may have filled for the same command line).
	onlyProtocolMeta(t, "a call without headers", call(t, c, "meta", "", nil).StructuredContent)
	// Values are sent as given: the caller checks them once, where it
	// assembles them (toolcall's header sources), not CallTool again.
	res = call(t, c, "meta", "", map[string]string{"X-Raw": "as given\t"})
	meta.Headers = nil
	if err := json.Unmarshal(res.StructuredContent, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Headers["X-Raw"] != "as given\t" {
		t.Errorf("_meta.headers = %v, want the value as given", meta.Headers)
	}
}

func TestAliveTurnsFalseWhenTheChildDies(t *testing.T) {
	t.Parallel()
	c := metaClient(t)
	if !c.Alive() {
		t.Fatal("a fresh client is not alive")
	}
	watched := runtime.GOOS == "linux" // pidfds (Linux 5.10+)
	if watched && c.Exited() == nil {
		t.Fatal("no exit watch for a stdio child")
	}
	select {
	case <-c.Exited():
		t.Fatal("Exited is closed while the child runs")
	default:
	}
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if watched {
		select {
		case <-c.Exited():
		case <-time.After(10 * time.Second):
			t.Fatal("Exited did not close after the child was killed")
		}
	}
	testkit.Eventually(t, 10*time.Second, "Alive to turn false after the child was killed", func() bool { return !c.Alive() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CallTool(ctx, "meta", nil, nil); !errors.Is(err, mcpclient.ErrConnectionLost) {
		t.Errorf("call on a dead child: err = %v, want ErrConnectionLost", err)
	}
}

// A call whose context ends is cancelled on the server too
// (notifications/cancelled), and the session stays usable.
func TestStdioCallCancelledOnTheServer(t *testing.T) {
	t.Parallel()
	c := metaClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.CallTool(ctx, "block", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked call: err = %v, want DeadlineExceeded", err)
	}
	testkit.Eventually(t, 10*time.Second, "the server to see the call cancelled", func() bool {
		return text(t, call(t, c, "cancelled", "", nil)) == "1"
	})
}
