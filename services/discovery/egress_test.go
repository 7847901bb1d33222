package discovery_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

const refusedByEgress = "refused by the egress policy"

// The SSRF attack of issue 11: a user's personal connection pointed at a
// loopback service, at a metadata address, at file://, and at an allowed
// host that redirects to loopback. Each is refused by the egress policy,
// the internal service never sees a request, and nothing of its answer
// reaches the user.
func TestPersonalConnectionSSRFRefused(t *testing.T) {
	t.Parallel()
	internal := newFake(t, tools("secret", 1)...)
	// The first hop lives on 127.0.0.2, allowed by CIDR; it redirects to
	// the internal service on 127.0.0.1.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	hop := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.RedirectHandler(internal.URL, http.StatusTemporaryRedirect)}}
	hop.Start()
	t.Cleanup(hop.Close)

	// A closed port on the allowed address: its error must not tell
	// "connection refused" from "filtered" (a port scan).
	closedLn, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closedLn.Addr().String()
	_ = closedLn.Close()

	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	closedPort := api.put("mallory", "closed", httpServer("http://"+closedAddr+"/mcp", ""))
	direct := api.put("mallory", "direct", httpServer(internal.URL, `"headers": {"Metadata-Flavor": "Google"}`))
	meta := api.put("mallory", "meta", httpServer("http://169.254.169.254/computeMetadata/v1/", `"headers": {"Metadata-Flavor": "Google"}`))
	metaV6 := api.put("mallory", "meta6", `{"type": "sse", "url": "http://[fd00:ec2::254]/latest"}`)
	file := api.put("mallory", "file", httpServer("file:///etc/passwd", ""))
	redirect := api.put("mallory", "redirect", httpServer(hop.URL+"/mcp", `"follow_redirects": true`))
	redirectOff := api.put("mallory", "redirect-off", httpServer(hop.URL+"/mcp", ""))
	b.PublishExtensions(t, `{"mcpServers": {}}`)
	logs := &testkit.SyncBuffer{}
	runServiceLogged(t, b, discovery.Config{NoWarmUp: true, Upstream: config.Upstream{Egress: config.EgressSettings{Allow: []string{"127.0.0.2/32"}}}},
		nil, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))

	r := listAs(t, b, "mallory")
	if len(r.Tools) != 0 {
		t.Fatalf("mallory reached tools %v", names(r))
	}
	for _, rt := range []string{direct, meta, metaV6, file, redirect} {
		f, ok := failure(r, rt)
		want := refusedByEgress
		if rt == file { // refused first by the definition rules every service applies
			want = "invalid definition: url: must use http or https"
		}
		if !ok || !strings.Contains(f.Error, want) {
			t.Errorf("failure of %s = %+v (%v), want %q", rt, f, ok, want)
		}
		// (The redirect's error quotes the Location the user's own
		// server sent, as net/http does.)
		for _, leak := range []string{"secret_0", "connection refused", "Google"} {
			if strings.Contains(f.Error, leak) {
				t.Errorf("failure of %s carries %q: %s", rt, leak, f.Error)
			}
		}
	}
	if f, ok := failure(r, redirectOff); !ok || !strings.Contains(f.Error, "redirect") || !strings.Contains(f.Error, "not followed") || strings.Contains(f.Error, "secret_0") {
		t.Errorf("failure of the redirect without follow_redirects = %+v (%v), want a redirect not followed", f, ok)
	}
	if f, ok := failure(r, closedPort); !ok || !strings.Contains(f.Error, "could not be reached") || strings.Contains(f.Error, "refused") {
		t.Errorf("failure of the closed port = %+v (%v), want the generic 'could not be reached'", f, ok)
	}
	if n := internal.inits(); n != 0 {
		t.Fatalf("the internal service got %d initialize request(s)", n)
	}
	if strings.Contains(logs.String(), "secret_0") {
		t.Fatal("the internal service's answer is in the logs")
	}
}

// An allowed upstream's error page stays out of failed_servers and the
// logs; the status code is reported.
func TestPersonalUpstreamErrorBodyNotShown(t *testing.T) {
	t.Parallel()
	down := newFake(t, tools("x", 1)...)
	down.mode.Store(modeFail)
	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "down", httpServer(down.URL, ""))
	b.PublishExtensions(t, `{"mcpServers": {}}`)
	logs := &testkit.SyncBuffer{}
	runServiceLogged(t, b, personalNoWarm, nil, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f, ok := failure(listAs(t, b, "alice"), rt)
	if !ok || !strings.Contains(f.Error, "500") {
		t.Fatalf("failure = %+v (%v), want the status code", f, ok)
	}
	if strings.Contains(f.Error, "fake server is down") || strings.Contains(logs.String(), "fake server is down") {
		t.Fatalf("the upstream's body is shown: %s", f.Error)
	}
}

// A personal connection to a tarpit (accepts, never answers) with
// session_init_timeout null: the owner's lookup ends with a clear error at
// the operator's maximum, and the tarpit sees its connection closed.
func TestPersonalTarpitIsBoundedAndClosed(t *testing.T) {
	t.Parallel()
	addr, _, closed := tarpit(t)

	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "tarpit", httpServer("http://"+addr+"/mcp", `"session_init_timeout": null`))
	b.PublishExtensions(t, `{"mcpServers": {}}`)
	cfg := personalNoWarm
	cfg.Upstream.PersonalConnections = config.PersonalConnections{MaxSessionInitTimeoutSeconds: 1, MaxToolCallTimeoutSeconds: 1}
	runService(t, b, cfg)

	r := listAs(t, b, "alice")
	f, ok := failure(r, rt)
	if !ok || !strings.Contains(f.Error, "session_init_timeout (1s)") {
		t.Fatalf("failure = %+v (%v), want the clamped session_init_timeout named", f, ok)
	}
	select {
	case <-closed:
	case <-time.After(2 * time.Minute):
		t.Fatal("the tarpit's connection is still open")
	}
	// Another lookup is bounded the same way (the connection is retried).
	if f, ok := failure(listAs(t, b, "alice"), rt); !ok {
		t.Fatalf("second lookup: no failure for the tarpit (%+v)", f)
	}
}

// A discovery of a personal connection to a tarpit, with a maximum too
// long to end it, is cancelled when the owner deletes the connection: the
// tarpit sees its connection closed, and the waiting lookup returns.
func TestPersonalTarpitDeletedConnectionCloses(t *testing.T) {
	t.Parallel()
	addr, accepted, closed := tarpit(t)

	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	api.put("alice", "tarpit", httpServer("http://"+addr+"/mcp", `"session_init_timeout": null`))
	b.PublishExtensions(t, `{"mcpServers": {}}`)
	cfg := personalNoWarm
	cfg.Upstream.PersonalConnections = config.PersonalConnections{MaxSessionInitTimeoutSeconds: 3600, MaxToolCallTimeoutSeconds: 3600}
	runService(t, b, cfg)

	first := make(chan error, 1)
	go func() {
		_, err := listReq(t, b, bus.ToolsListRequest{UserID: "alice"})
		first <- err
	}()
	select {
	case <-accepted:
	case <-time.After(time.Minute):
		t.Fatal("the tarpit was never reached")
	}
	api.mu.Lock()
	delete(api.conns["alice"], "tarpit")
	api.mu.Unlock()
	api.announce("alice")
	// Look up (briefly: until the event is handled a lookup waits on the
	// old discovery) until the connections are read again.
	testkit.Eventually(t, time.Minute, "the connections read again after the deletion", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = bus.Request[bus.ToolsListReply](ctx, b.NC, b.Names.ToolsList(), bus.ToolsListRequest{UserID: "alice"})
		return api.asked("alice") >= 2
	})
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the tarpit's connection is still open after the connection was deleted")
	}
	if err := testkit.Receive(t, 60*time.Second, "the first lookup to return", first); err != nil {
		t.Fatalf("the first lookup: %v", err)
	}
}

// tarpit listens on loopback, accepts one connection and never answers:
// accepted is closed when the connection comes, closed when the client
// closes it (EOF).
func tarpit(t *testing.T) (addr string, accepted, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	acc, cl := make(chan struct{}), make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		close(acc)
		_, _ = io.Copy(io.Discard, c)
		close(cl)
	}()
	return ln.Addr().String(), acc, cl
}
