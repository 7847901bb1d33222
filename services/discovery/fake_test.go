package discovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Fake server modes.
const (
	modeOK   int32 = iota
	modeFail       // every request gets HTTP 500
	modeHang       // every request blocks until the client gives up
)

// fakeTool is one tool a fake server lists.
type fakeTool struct {
	Name, Description string
}

// fake is an mcp-go server over streamable HTTP (httptest) that counts the
// JSON-RPC methods it receives, so tests can tell exactly which servers were
// initialized and listed. Its mode switches it between healthy, failing and
// hung; its header check refuses requests without the expected header.
type fake struct {
	URL  string
	mode atomic.Int32

	mu      sync.Mutex
	counts  map[string]int
	headers []http.Header

	// wantHeader/wantValue, when set, make requests without that exact
	// header value fail with 401 (the body echoes what was sent).
	wantHeader, wantValue string
	// opts are extra mcp-go server options.
	opts []server.ServerOption
	// srv is the mcp-go server (a test may add tools to it).
	srv *server.MCPServer
}

// newFake serves tools on an httptest server until the test ends.
func newFake(t testing.TB, tools ...fakeTool) *fake {
	t.Helper()
	f := &fake{counts: map[string]int{}}
	f.URL = startFake(t, f, tools)
	return f
}

// newFakePaged is newFake listing at most pageSize tools per tools/list page.
func newFakePaged(t testing.TB, pageSize int, tools ...fakeTool) *fake {
	t.Helper()
	f := &fake{counts: map[string]int{}, opts: []server.ServerOption{server.WithPaginationLimit(pageSize)}}
	f.URL = startFake(t, f, tools)
	return f
}

// newFakeAuth is newFake with a required header.
func newFakeAuth(t testing.TB, header, value string, tools ...fakeTool) *fake {
	t.Helper()
	f := &fake{counts: map[string]int{}, wantHeader: header, wantValue: value}
	f.URL = startFake(t, f, tools)
	return f
}

func startFake(t testing.TB, f *fake, tools []fakeTool) string {
	s := server.NewMCPServer("fake", "1.0.0", append([]server.ServerOption{server.WithToolCapabilities(false)}, f.opts...)...)
	f.srv = s
	for _, tl := range tools {
		s.AddTool(mcp.NewTool(tl.Name, mcp.WithDescription(tl.Description), mcp.WithString("q", mcp.Description("query"))),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
	}
	// A legacy server (server/discover without 2026-07-28): the counts are
	// of initialize requests.
	inner := server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618))
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &msg)
			f.mu.Lock()
			f.counts[msg.Method]++
			f.headers = append(f.headers, r.Header.Clone())
			f.mu.Unlock()
		}
		switch f.mode.Load() {
		case modeFail:
			http.Error(w, "fake server is down", http.StatusInternalServerError)
			return
		case modeHang:
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		if f.wantHeader != "" && r.Header.Get(f.wantHeader) != f.wantValue {
			http.Error(w, fmt.Sprintf("unauthorized: %s %q is not accepted", f.wantHeader, r.Header.Get(f.wantHeader)), http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) })
	return hs.URL + "/mcp"
}

// inits is how many initialize requests the fake received.
func (f *fake) inits() int { return f.count("initialize") }

// lists is how many tools/list requests the fake received.
func (f *fake) lists() int { return f.count("tools/list") }

func (f *fake) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[method]
}

// tools builds n tools named <prefix>0 … <prefix>n-1.
func tools(prefix string, n int) []fakeTool {
	out := make([]fakeTool, n)
	for i := range out {
		out[i] = fakeTool{Name: fmt.Sprintf("%s%d", prefix, i), Description: fmt.Sprintf("tool %d of %s", i, prefix)}
	}
	return out
}

// sentHeaders is the headers of every POST the fake received so far.
func (f *fake) sentHeaders() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.headers...)
}
