package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/mark3labs/mcp-go/server/servertest"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

var demoTools = []string{"add", "answer_report", "block", "cancel_report", "cancellations", "echo", "fail", "get_report_status", "progress", "slow", "submit_report", "weather", "whoami"}

// swapHandler serves through a handler that a test can replace, e.g. to
// "restart" a server.
type swapHandler struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *swapHandler) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func newStreamableServer(t *testing.T, h http.Handler) *httptest.Server {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts
}

var staticHeaders = map[string]string{
	"x-tenant":      "static-tenant",
	"X-Static":      "s1",
	"authorization": "Bearer static-token",
}

// checkBasics lists the demo tools and calls echo and add.
func checkBasics(t *testing.T, c *mcpclient.Client) {
	t.Helper()
	got := toolNames(listTools(t, c))
	slices.Sort(got)
	if !slices.Equal(got, demoTools) {
		t.Errorf("tools = %v, want %v", got, demoTools)
	}
	if got := text(t, call(t, c, "echo", `{"message":"over http"}`, nil)); got != "over http" {
		t.Errorf("echo = %q", got)
	}
	if got := string(call(t, c, "weather", `{"city":"Oslo"}`, nil).StructuredContent); got != `{"city":"Oslo","temperature_c":21,"conditions":"sunny"}` {
		t.Errorf("weather structured = %s", got)
	}
}

// checkHeaders checks that static headers arrive on every call, and that
// per-request headers arrive on theirs only, replacing static ones whatever
// their case.
func checkHeaders(t *testing.T, c *mcpclient.Client) {
	t.Helper()
	want := map[string]string{"X-Tenant": "static-tenant", "X-Static": "s1", "Authorization": "Bearer static-token"}
	if got := whoami(t, c, nil).Headers; !mapsEqual(got, want) {
		t.Errorf("static headers = %v, want %v", got, want)
	}
	per := map[string]string{"X-Tenant": "req-tenant", "AUTHORIZATION": "Bearer req-token", "x-request-only": "r1"}
	want = map[string]string{"X-Tenant": "req-tenant", "X-Static": "s1", "Authorization": "Bearer req-token", "X-Request-Only": "r1"}
	if got := whoami(t, c, per).Headers; !mapsEqual(got, want) {
		t.Errorf("per-request headers = %v, want %v", got, want)
	}
	want = map[string]string{"X-Tenant": "static-tenant", "X-Static": "s1", "Authorization": "Bearer static-token"}
	if got := whoami(t, c, nil).Headers; !mapsEqual(got, want) {
		t.Errorf("headers after a per-request call = %v, want %v", got, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func checkDeadline(t *testing.T, c *mcpclient.Client, seconds string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.CallTool(ctx, "slow", json.RawMessage(`{"seconds":`+seconds+`}`), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow with a 200ms deadline: err = %v, want DeadlineExceeded", err)
	}
	if got := text(t, call(t, c, "echo", `{"message":"after deadline"}`, nil)); got != "after deadline" {
		t.Errorf("echo after deadline = %q", got)
	}
}

func TestStreamableHTTP(t *testing.T) {
	t.Parallel()
	ts := newStreamableServer(t, server.NewStreamableHTTPServer(demo.NewServer()))
	c := connect(t, mcpclient.Spec{Server: "demo-http", Transport: mcpclient.TransportHTTP, URL: ts.URL + "/mcp", Headers: staticHeaders})
	if c.Pid() != 0 || c.Stderr() != "" {
		t.Errorf("Pid/Stderr over http = %d/%q", c.Pid(), c.Stderr())
	}
	checkBasics(t, c)
	checkHeaders(t, c)
	checkDeadline(t, c, "60")
}

func TestSSE(t *testing.T) {
	t.Parallel()
	ts := servertest.NewTestServer(demo.NewServer())
	t.Cleanup(ts.Close)
	c := connect(t, mcpclient.Spec{Server: "demo-sse", Transport: mcpclient.TransportSSE, URL: ts.URL + "/sse", Headers: staticHeaders})
	checkBasics(t, c)
	checkHeaders(t, c)
	// The SSE server does not cancel handlers, so keep the sleep short.
	checkDeadline(t, c, "2")
}

func TestPagination(t *testing.T) {
	t.Parallel()
	ts := newStreamableServer(t, server.NewStreamableHTTPServer(demo.NewServer(server.WithPaginationLimit(2))))
	c := connect(t, mcpclient.Spec{Server: "paged", Transport: mcpclient.TransportHTTP, URL: ts.URL})
	got := toolNames(listTools(t, c))
	slices.Sort(got)
	if !slices.Equal(got, demoTools) {
		t.Errorf("tools = %v, want all of %v", got, demoTools)
	}
}

func TestStreamableSessionExpired404(t *testing.T) {
	t.Parallel()
	sw := &swapHandler{h: server.NewStreamableHTTPServer(demo.NewServer(), server.WithStateful(true))}
	ts := newStreamableServer(t, sw)
	// Sessions are of the legacy era only.
	spec := mcpclient.Spec{Server: "forgetful", Transport: mcpclient.TransportHTTP, URL: ts.URL, Era: mcpclient.EraLegacy}
	c := connect(t, spec)
	call(t, c, "echo", `{"message":"before"}`, nil)

	// "Restart" the server: the new one does not know the session.
	sw.set(server.NewStreamableHTTPServer(demo.NewServer(), server.WithStateful(true)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"after"}`), nil)
	if !errors.Is(err, mcpclient.ErrSessionExpired) {
		t.Fatalf("CallTool after restart: err = %v, want ErrSessionExpired", err)
	}
	t.Log(err)
	if _, err := c.ListTools(ctx); !errors.Is(err, mcpclient.ErrSessionExpired) {
		t.Errorf("ListTools after restart: err = %v, want ErrSessionExpired", err)
	}

	// Re-initializing once is the cure.
	c2 := connect(t, spec)
	if got := text(t, call(t, c2, "echo", `{"message":"again"}`, nil)); got != "again" {
		t.Errorf("echo after reconnect = %q", got)
	}
}

// forgetAfter answers POSTs carrying a session id with status and body
// once forget is set.
type forgetAfter struct {
	next   http.Handler
	status int
	ctype  string
	body   string

	mu     sync.Mutex
	forget bool
}

func (f *forgetAfter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	forget := f.forget
	f.mu.Unlock()
	if forget && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
		w.Header().Set("Content-Type", f.ctype)
		w.WriteHeader(f.status)
		io.WriteString(w, f.body)
		return
	}
	f.next.ServeHTTP(w, r)
}

func TestStreamableSessionExpired400(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		ctype, body string
		expired     bool
	}{
		"json-rpc body": {"application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`, true},
		"text body":     {"text/plain", "Bad Request: unknown session\n", true},
		"other 400":     {"application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &forgetAfter{next: server.NewStreamableHTTPServer(demo.NewServer()), status: http.StatusBadRequest, ctype: tc.ctype, body: tc.body}
			ts := newStreamableServer(t, f)
			c := connect(t, mcpclient.Spec{Server: "forgetful", Transport: mcpclient.TransportHTTP, URL: ts.URL, Era: mcpclient.EraLegacy})
			call(t, c, "echo", `{"message":"before"}`, nil)
			f.mu.Lock()
			f.forget = true
			f.mu.Unlock()

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"after"}`), nil)
			if err == nil {
				t.Fatal("CallTool succeeded")
			}
			t.Log(err)
			if got := errors.Is(err, mcpclient.ErrSessionExpired); got != tc.expired {
				t.Errorf("errors.Is(%v, ErrSessionExpired) = %v, want %v", err, got, tc.expired)
			}
		})
	}
}

func TestSSESessionExpired(t *testing.T) {
	t.Parallel()
	sw := &swapHandler{}
	ts := httptest.NewUnstartedServer(sw)
	ts.Start()
	t.Cleanup(ts.Close)
	sw.set(server.NewSSEServer(demo.NewServer(), server.WithBaseURL(ts.URL)))

	c := connect(t, mcpclient.Spec{Server: "forgetful-sse", Transport: mcpclient.TransportSSE, URL: ts.URL + "/sse"})
	call(t, c, "echo", `{"message":"before"}`, nil)

	sw.set(server.NewSSEServer(demo.NewServer(), server.WithBaseURL(ts.URL)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"after"}`), nil)
	if !errors.Is(err, mcpclient.ErrSessionExpired) {
		t.Fatalf("CallTool after restart: err = %v, want ErrSessionExpired", err)
	}
	t.Log(err)
}

func TestHeaderValuesStayOutOfErrors(t *testing.T) {
	t.Parallel()
	demoHandler := server.NewStreamableHTTPServer(demo.NewServer())
	// A server that echoes credentials into its error responses.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Fail") != "" {
			http.Error(w, "rejected "+r.Header.Get("Authorization")+" for tenant "+r.Header.Get("X-Tenant"), http.StatusInternalServerError)
			return
		}
		demoHandler.ServeHTTP(w, r)
	})
	ts := newStreamableServer(t, h)
	c := connect(t, mcpclient.Spec{Server: "leaky", Transport: mcpclient.TransportHTTP, URL: ts.URL,
		Headers: map[string]string{"X-Tenant": "static-tenant-secret"}})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.CallTool(ctx, "echo", json.RawMessage(`{"message":"x"}`),
		&mcpclient.CallOptions{Headers: map[string]string{"X-Fail": "yes", "Authorization": "Bearer per-request-secret"}})
	if err == nil {
		t.Fatal("CallTool succeeded")
	}
	msg := err.Error()
	t.Log(msg)
	if strings.Contains(msg, "per-request-secret") || strings.Contains(msg, "static-tenant-secret") {
		t.Errorf("error leaks a header value: %s", msg)
	}
	// The echo goes with the rest of the body: the status code stays.
	if !strings.Contains(msg, `mcp server "leaky"`) || !strings.Contains(msg, "status 500") || strings.Contains(msg, "rejected") {
		t.Errorf("error = %s, want the server and the status named, and no body", msg)
	}

	_, err = c.CallTool(ctx, "echo", json.RawMessage(`{"message":"x"}`), &mcpclient.CallOptions{Headers: map[string]string{"X-Bad": "line1\nline2"}})
	if err == nil || !strings.Contains(err.Error(), "X-Bad") || strings.Contains(err.Error(), "line1") {
		t.Errorf("invalid header value: err = %v, want one naming X-Bad without its value", err)
	}

	_, err = mcpclient.Connect(ctx, mcpclient.Spec{Server: "bad", Transport: mcpclient.TransportHTTP, URL: ts.URL,
		Headers: map[string]string{"Authorization": " Bearer padded-secret"}})
	if err == nil || strings.Contains(err.Error(), "padded-secret") {
		t.Errorf("invalid static header: err = %v", err)
	}
}

func TestConnectHTTPBoundedByContext(t *testing.T) {
	t.Parallel()
	// A server that accepts the SSE stream but never sends the endpoint.
	block := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-block:
		}
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(block) })

	for _, kind := range []string{mcpclient.TransportSSE, mcpclient.TransportHTTP} {
		// The server never answers: only the deadline ends Connect.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		connected := make(chan error, 1)
		go func() {
			c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "mute", Transport: kind, URL: ts.URL, Logger: testLogger(t)})
			if err == nil {
				c.Close()
			}
			connected <- err
		}()
		err := testkit.Receive(t, 60*time.Second, kind+" Connect to return after its 300ms deadline", connected)
		cancel()
		if err == nil {
			t.Fatalf("%s: Connect succeeded", kind)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: err = %v, want DeadlineExceeded", kind, err)
		}
	}
}
