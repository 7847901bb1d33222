package mcpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// hugeFakeEnv re-executes the test binary as a stdio server whose
// tools/call answer is one 300 MB line.
const hugeFakeEnv = "MCPCLIENT_HUGE_FAKE"

// hugeBytes is the size of the fakes' huge answers.
const hugeBytes = 300 << 20

const initResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"huge","version":"1"}}`

func serveHugeFake() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, initResult)
			_ = out.Flush()
		case "tools/call":
			testkit.WriteHugeResult(out, m.ID, hugeBytes, func() { _ = out.Flush() })
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
			_ = out.Flush()
		}
	}
}

// A tool that answers 300 MB fails with an error naming the server and the
// limit, and reading stops at the limit: the process allocates far less
// than the answer (without the cap mcp-go buffers all of it, and more).
func TestHugeResponseIsCutAtTheLimit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec func(t *testing.T) mcpclient.Spec
	}{
		{"stdio", func(*testing.T) mcpclient.Spec {
			return mcpclient.Spec{Server: "huge-stdio", Command: exe, Env: map[string]string{hugeFakeEnv: "1"}}
		}},
		{"http-json", func(t *testing.T) mcpclient.Spec {
			return mcpclient.Spec{Server: "huge-json", Transport: mcpclient.TransportHTTP, URL: testkit.HugeMCPServer(t, hugeBytes, false).URL}
		}},
		{"http-sse", func(t *testing.T) mcpclient.Spec {
			return mcpclient.Spec{Server: "huge-sse", Transport: mcpclient.TransportHTTP, URL: testkit.HugeMCPServer(t, hugeBytes, true).URL}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec(t)
			c := connect(t, spec)
			before := memStats()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := c.CallTool(ctx, "big", nil, nil)
			after := memStats()
			if err == nil {
				t.Fatal("a 300 MB answer succeeded")
			}
			if !errors.Is(err, mcpclient.ErrResponseTooLarge) {
				t.Fatalf("error %v, want ErrResponseTooLarge", err)
			}
			limit := strconv.Itoa(mcpclient.DefaultMaxResponseBytes)
			if msg := err.Error(); !strings.Contains(msg, spec.Server) || !strings.Contains(msg, limit) {
				t.Fatalf("error %q does not name the server %q and the limit %s", msg, spec.Server, limit)
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("error carries %d bytes (of the response?)", len(err.Error()))
			}
			const bound = 200 << 20
			if d := after.TotalAlloc - before.TotalAlloc; d > bound {
				t.Fatalf("the call allocated %d MB, want under %d MB", d>>20, bound>>20)
			}
			if d := int64(after.HeapInuse) - int64(before.HeapInuse); d > bound {
				t.Fatalf("heap in use grew by %d MB, want under %d MB", d>>20, bound>>20)
			}
		})
	}
}

func memStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// An upstream's error body (an internal service's page, say) never comes
// back in the error: the status code does.
func TestErrorBodyNotQuoted(t *testing.T) {
	t.Parallel()
	const body = "internal-service-secret-page"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		switch {
		case m.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, initResult)
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, body)
		}
	}))
	t.Cleanup(ts.Close)
	c := connect(t, mcpclient.Spec{Server: "bodies", Transport: mcpclient.TransportHTTP, URL: ts.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "x", nil, nil)
	if err == nil {
		t.Fatal("call succeeded")
	}
	if strings.Contains(err.Error(), body) || !strings.Contains(err.Error(), "status 502") {
		t.Fatalf("error %q: want the status code and not the body", err)
	}
}

// On the legacy SSE transport every response arrives on the one GET
// stream: an event over the limit ends the session at once (the call
// fails naming the limit instead of waiting for its deadline).
func TestLegacySSEEventOverTheLimit(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("big-sse", "1")
	s.AddTool(mcp.NewTool("big"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(strings.Repeat("a", 64<<10)), nil
	})
	s.AddTool(mcp.NewTool("small"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	ts := servertest.NewTestServer(s)
	t.Cleanup(ts.Close)
	c := connect(t, mcpclient.Spec{Server: "big-sse", Transport: mcpclient.TransportSSE, URL: ts.URL + "/sse", MaxResponseBytes: 32 << 10})
	call(t, c, "small", "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := c.CallTool(ctx, "big", nil, nil)
	if !errors.Is(err, mcpclient.ErrResponseTooLarge) || !strings.Contains(err.Error(), "32768") || ctx.Err() != nil {
		t.Fatalf("call = %v (ctx %v), want ErrResponseTooLarge naming 32768 before the deadline", err, ctx.Err())
	}
}
