package mcpclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/egress"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// recorder is a loopback listener that records the headers of every
// request it gets.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newRecorder(t *testing.T, next http.Handler) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Clone())
		r.mu.Unlock()
		if next == nil {
			http.Error(w, "recorded", http.StatusTeapot)
			return
		}
		next.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.seen...)
}

const redirectSecret = "Bearer deploy-secret-7f3a9c"

// The attack: a deployment upstream answers 307 to a loopback listener.
// Nothing is replayed there, neither the configured Authorization nor a
// call's own secret header, and the error names the server and the
// redirect.
func TestRedirectToLoopbackNotFollowed(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	front := &swapHandler{h: redirectTo(rec.URL + "/steal")}
	ts := newStreamableServer(t, front)
	spec := mcpclient.Spec{Server: "redirecting", Transport: mcpclient.TransportHTTP, URL: ts.URL + "/mcp",
		Headers: map[string]string{"Authorization": redirectSecret}, Logger: testLogger(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, spec)
	if err == nil {
		_ = c.Close()
		t.Fatal("Connect through a redirect succeeded")
	}
	checkRedirectRefused(t, err)

	// A session opened before the upstream starts redirecting: the call's
	// own header does not travel either.
	front.set(server.NewStreamableHTTPServer(demo.NewServer()))
	c = connect(t, spec)
	front.set(redirectTo(rec.URL + "/steal"))
	_, err = c.CallTool(ctx, "whoami", nil, &mcpclient.CallOptions{Headers: map[string]string{"X-User-Token": "per-call-secret-51b2"}})
	checkRedirectRefused(t, err)
	if got := rec.requests(); len(got) != 0 {
		t.Fatalf("the loopback listener got %d request(s): %v", len(got), got)
	}
}

func redirectTo(target string) http.Handler {
	return http.RedirectHandler(target, http.StatusTemporaryRedirect)
}

func checkRedirectRefused(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, mcpclient.ErrRedirect) {
		t.Fatalf("error %v, want ErrRedirect", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `"redirecting"`) || !strings.Contains(msg, "redirect") || !strings.Contains(msg, "follow_redirects") {
		t.Fatalf("error %q does not name the server and the redirect", msg)
	}
	if strings.Contains(msg, "deploy-secret") || strings.Contains(msg, "per-call-secret") {
		t.Fatalf("error %q carries a secret", msg)
	}
}

// A server that opts in has its redirects followed, but a hop to another
// origin carries none of the configured or per-call headers.
func TestRedirectOptInDropsHeadersAcrossOrigins(t *testing.T) {
	t.Parallel()
	target := newRecorder(t, server.NewStreamableHTTPServer(demo.NewServer()))
	front := newStreamableServer(t, redirectTo(target.URL+"/mcp"))
	c := connect(t, mcpclient.Spec{Server: "moved", Transport: mcpclient.TransportHTTP, URL: front.URL + "/mcp", FollowRedirects: true,
		Headers: map[string]string{"Authorization": redirectSecret, "X-Api-Key": "static-key-0d4e"}})
	id := whoami(t, c, map[string]string{"X-User-Token": "per-call-secret-51b2"})
	for name, v := range id.Headers {
		if strings.Contains(v, "secret") || strings.Contains(v, "static-key") {
			t.Errorf("the other origin got %s: %s", name, v)
		}
	}
	if len(target.requests()) == 0 {
		t.Fatal("the redirect was not followed")
	}
}

// With redirects followed, every hop is still checked by the client's own
// CheckRedirect (the egress policy): a hop to loopback is refused before
// anything is sent there.
func TestRedirectOptInCheckedByEgress(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	front := newStreamableServer(t, redirectTo(rec.URL+"/steal"))
	hc := mcpclient.SharedHTTPClient()
	hc.CheckRedirect = egress.MustNew(nil, nil).CheckRedirect
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "moved", Transport: mcpclient.TransportHTTP, URL: front.URL + "/mcp",
		FollowRedirects: true, HTTPClient: hc, Headers: map[string]string{"Authorization": redirectSecret}, Logger: testLogger(t)})
	if err == nil {
		_ = c.Close()
		t.Fatal("Connect through a redirect to loopback succeeded")
	}
	if !errors.Is(err, egress.ErrRefused) || strings.Contains(err.Error(), "deploy-secret") {
		t.Fatalf("error %v, want refused by the egress policy", err)
	}
	if got := rec.requests(); len(got) != 0 {
		t.Fatalf("the loopback listener got %d request(s)", len(got))
	}
}
