package mcpclient_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
)

// TestResourceUpdatedReachesOnResourceUpdated: a subscription to the demo
// server's greeting, then a change of it, hands the raw URI of the
// server's notifications/resources/updated to Spec.OnResourceUpdated, and a
// read then returns the new content.
func TestResourceUpdatedReachesOnResourceUpdated(t *testing.T) {
	t.Parallel()
	updated := make(chan string, 4)
	spec := demoSpec()
	spec.Args = []string{"-federation"}
	spec.Era = mcpclient.EraLegacy // resources/subscribe is a 2025-11-25 method
	spec.OnResourceUpdated = func(uri string) { updated <- uri }
	c := connect(t, spec)
	if !c.ServerInfo().Features.ResourcesSubscribe {
		t.Fatalf("the demo server's -federation catalog does not declare resources.subscribe: %+v", c.ServerInfo().Features)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := json.RawMessage(`{"uri":"` + demo.GreetingURI + `"}`)
	if _, err := c.Request(ctx, mcpclient.MethodResourcesSubscribe, params, nil); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	touchAndAwait(ctx, t, c, updated)
	raw, err := c.Request(ctx, mcpclient.MethodResourcesRead, params, nil)
	if err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	var got struct {
		Contents []struct {
			Text string `json:"text"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || len(got.Contents) != 1 || got.Contents[0].Text != demo.GreetingText(1) {
		t.Fatalf("read after the update = %s (%v), want the text %q", raw, err, demo.GreetingText(1))
	}
	if _, err := c.Request(ctx, mcpclient.MethodResourcesUnsubscribe, params, nil); err != nil {
		t.Fatalf("resources/unsubscribe: %v", err)
	}
}

// TestResourceUpdatedFromAnotherClient: over streamable HTTP and SSE the
// update is sent outside any request of the subscriber (another client
// changes the resource), so it reaches OnResourceUpdated only on the
// session's stream: SSE's always, streamable HTTP's GET stream, which the
// client opens when OnResourceUpdated is set.
func TestResourceUpdatedFromAnotherClient(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{mcpclient.TransportHTTP, mcpclient.TransportSSE} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			s, err := demo.New(demo.Config{Federation: true})
			if err != nil {
				t.Fatal(err)
			}
			sw := &swapHandler{}
			ts := httptest.NewServer(sw)
			t.Cleanup(ts.Close)
			url := ts.URL
			if transport == mcpclient.TransportSSE {
				sw.set(server.NewSSEServer(s, server.WithBaseURL(ts.URL)))
				url += "/sse"
			} else {
				sw.set(server.NewStreamableHTTPServer(s, server.WithStateful(true)))
			}
			updated := make(chan string, 4)
			sub := connect(t, mcpclient.Spec{Server: "demo", Transport: transport, URL: url, Era: mcpclient.EraLegacy,
				OnResourceUpdated: func(uri string) { updated <- uri }})
			other := connect(t, mcpclient.Spec{Server: "demo", Transport: transport, URL: url, Era: mcpclient.EraLegacy})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := sub.Request(ctx, mcpclient.MethodResourcesSubscribe, json.RawMessage(`{"uri":"`+demo.GreetingURI+`"}`), nil); err != nil {
				t.Fatalf("resources/subscribe: %v", err)
			}
			// A GET stream opens after initialize, asynchronously: touch
			// until an update arrives (each touch notifies every open
			// stream).
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, err := other.CallTool(ctx, demo.ToolTouchGreeting, nil, nil); err != nil {
					t.Fatalf("%s: %v", demo.ToolTouchGreeting, err)
				}
				select {
				case uri := <-updated:
					if uri != demo.GreetingURI {
						t.Fatalf("updated uri = %q, want %q", uri, demo.GreetingURI)
					}
					return
				case <-ctx.Done():
					t.Fatal("no notifications/resources/updated reached the subscriber's OnResourceUpdated")
				case <-tick.C:
				}
			}
		})
	}
}

// TestListenResourcesOnAModernServer: a 2026-07-28-only server (stdio and
// streamable HTTP) has no resources/subscribe; ListenResources opens a
// subscriptions/listen with resourceSubscriptions, the server's
// notifications/resources/updated on it reach Spec.OnResourceUpdated, a
// new set replaces the listen and an empty one ends it.
func TestListenResourcesOnAModernServer(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{mcpclient.TransportStdio, mcpclient.TransportHTTP} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			updated := make(chan string, 4)
			spec := demoSpec()
			spec.Args = []string{"-federation", "-era", demo.EraModern}
			if transport == mcpclient.TransportHTTP {
				h, err := demo.NewHTTP(demo.EraModern, demo.Config{Federation: true})
				if err != nil {
					t.Fatal(err)
				}
				spec = mcpclient.Spec{Server: "demo", Transport: transport, URL: newStreamableServer(t, h).URL + "/mcp"}
			}
			spec.OnResourceUpdated = func(uri string) { updated <- uri }
			c := connect(t, spec)
			if c.ServerInfo().Era != mcpclient.EraModern || !c.ServerInfo().Features.ResourcesSubscribe {
				t.Fatalf("server info = %+v, want a 2026-07-28 server declaring resources.subscribe", c.ServerInfo())
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			listened := func() string {
				res, err := c.CallTool(ctx, demo.ToolListenedResources, nil, nil)
				if err != nil {
					t.Fatalf("%s: %v", demo.ToolListenedResources, err)
				}
				return text(t, res)
			}
			if err := c.ListenResources(ctx, []string{demo.GreetingURI}); err != nil {
				t.Fatalf("ListenResources: %v", err)
			}
			if got := listened(); got != demo.GreetingURI {
				t.Fatalf("listened resources = %q, want %q", got, demo.GreetingURI)
			}
			touchAndAwait(ctx, t, c, updated)
			// A wider set replaces the listen (the old one ends).
			if err := c.ListenResources(ctx, []string{demo.GreetingURI, demo.BlobURI}); err != nil {
				t.Fatalf("ListenResources (two): %v", err)
			}
			waitListened(t, listened, demo.BlobURI+","+demo.GreetingURI)
			if err := c.ListenResources(ctx, nil); err != nil {
				t.Fatalf("ListenResources (none): %v", err)
			}
			waitListened(t, listened, "")
		})
	}
}

// touchAndAwait calls touch_greeting on c and waits for its update to
// reach OnResourceUpdated (updated).
func touchAndAwait(ctx context.Context, t *testing.T, c *mcpclient.Client, updated <-chan string) {
	t.Helper()
	if _, err := c.CallTool(ctx, demo.ToolTouchGreeting, nil, nil); err != nil {
		t.Fatalf("%s: %v", demo.ToolTouchGreeting, err)
	}
	select {
	case uri := <-updated:
		if uri != demo.GreetingURI {
			t.Fatalf("updated uri = %q, want %q", uri, demo.GreetingURI)
		}
	case <-ctx.Done():
		t.Fatal("no notifications/resources/updated reached OnResourceUpdated")
	}
}

// waitListened polls listened, with a deadline, until it answers want.
func waitListened(t *testing.T, listened func() string, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := listened()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listened resources = %q, want %q", got, want)
		}
		runtime.Gosched()
	}
}

// TestListenResourcesReopensAnEndedListen: when the server's side of the
// listen ends (its connection dropped), the same URIs asked for again
// open a new listen instead of counting the ended one.
func TestListenResourcesReopensAnEndedListen(t *testing.T) {
	t.Parallel()
	h, err := demo.NewHTTP(demo.EraModern, demo.Config{Federation: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := newStreamableServer(t, h)
	c := connect(t, mcpclient.Spec{Server: "demo", Transport: mcpclient.TransportHTTP, URL: ts.URL + "/mcp", OnResourceUpdated: func(string) {}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listened := func() string { return text(t, call(t, c, demo.ToolListenedResources, "", nil)) }
	if err := c.ListenResources(ctx, []string{demo.GreetingURI}); err != nil {
		t.Fatalf("ListenResources: %v", err)
	}
	ts.CloseClientConnections()
	waitListened(t, listened, "")
	if err := c.ListenResources(ctx, []string{demo.GreetingURI}); err != nil {
		t.Fatalf("ListenResources again: %v", err)
	}
	if got := listened(); got != demo.GreetingURI {
		t.Fatalf("listened resources after asking again = %q, want %q", got, demo.GreetingURI)
	}
}
