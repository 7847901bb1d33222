package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

const erasKey = "mcp-eras-key-0001"

// TestSubscriptionsWhateverTheUpstreamSpeaks: `mcpbus dev` in front of
// the demo server speaking 2026-07-28 only, over streamable HTTP
// ("modern") and over stdio ("mstdio"), and server-everything over
// streamable HTTP ("everything"). A 2025-11-25 client (mcp-go, its GET
// stream open) subscribes through mcpbus and receives each upstream's
// notifications/resources/updated with the visible URI.
func TestSubscriptionsWhateverTheUpstreamSpeaks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	modernAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "demo-modern", demoBin, "-transport", "http", "-addr", modernAddr, "-era", demo.EraModern, "-federation")
	everything := testkit.ServeEverything(t, "streamableHttp") + "/mcp"
	ext := fmt.Sprintf(`{"mcpServers": {"modern": {"type": "http", "url": "http://%s/mcp"},
		"mstdio": {"type": "stdio", "command": %q, "args": ["-federation", "-era", %q]},
		"everything": {"type": "http", "url": %q}}}`, modernAddr, demoBin, demo.EraModern, everything)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	settings := fmt.Sprintf(`api:
  listen: %s
  keys:
    - {sha256: %s, user_id: alice, role: user}
`, apiAddr, sha(erasKey))
	dev := startDevIn(t, dir, ext, settings)
	t.Cleanup(func() { dev.stop(t) })
	base := "http://" + apiAddr
	probe := mcpClient(t, base, erasKey)
	initialized(t, probe, mcp.ProtocolVersion20251125)
	testkit.Eventually(t, 120*time.Second, "every server's resources listed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := probe.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, r := range res.Resources {
			seen[strings.SplitN(strings.TrimPrefix(r.URI, "mcpbus://"), "/", 2)[0]] = true
		}
		return seen["modern"] && seen["mstdio"] && seen["everything"]
	})

	// A 2026-07-28-only upstream over HTTP: one listen on mcpbus's
	// connection, with the union of the subscribed URIs, narrowed by an
	// unsubscribe and ended by the last.
	t.Run("modern", func(t *testing.T) {
		subscribeAndNarrow(t, base, "modern")
	})
	// A 2026-07-28-only stdio upstream: the listen is the thread's own
	// session's, so the update of a resource its own process changed
	// (touch_greeting in the same thread) reaches the client, and a read
	// in the thread sees the change.
	t.Run("stdio", func(t *testing.T) {
		subscribeAndNarrow(t, base, "mstdio")
	})
	// server-everything over streamable HTTP keeps subscriptions and
	// simulated updates per upstream session: the subscription is made on
	// the session the caller's calls use, so toggle-subscriber-updates
	// (a call) sends updates of what was subscribed.
	t.Run("everything", func(t *testing.T) {
		everythingUpdateReaches(t, base, erasKey)
	})
}

// subscribeAndNarrow subscribes the demo server's greeting and blob of
// server through mcpbus, checks the update of the greeting arrives with
// the visible URI and what the upstream listens to as subscriptions
// leave.
func subscribeAndNarrow(t *testing.T, base, server string) {
	t.Helper()
	c, seen := streamingClient(t, base, erasKey)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	greeting, blob := "mcpbus://"+server+"/"+demo.GreetingURI, "mcpbus://"+server+"/"+demo.BlobURI
	listened := func() string {
		text, isErr := callText(t, c, server+"_"+demo.ToolListenedResources, nil)
		if isErr {
			t.Fatalf("%s: %s", demo.ToolListenedResources, text)
		}
		return text
	}
	for _, uri := range []string{greeting, blob} {
		if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}}); err != nil {
			t.Fatalf("resources/subscribe %s: %v", uri, err)
		}
	}
	if got, want := listened(), demo.BlobURI+","+demo.GreetingURI; got != want {
		t.Fatalf("the upstream listens to %q, want %q", got, want)
	}
	text, isErr := callText(t, c, server+"_"+demo.ToolTouchGreeting, nil)
	if isErr {
		t.Fatalf("touch_greeting: %s", text)
	}
	seen.await(t, string(mcp.MethodNotificationResourceUpdated))
	if got := seen.params(t, string(mcp.MethodNotificationResourceUpdated)); !strings.Contains(got, `"uri":"`+greeting+`"`) {
		t.Errorf("updated %s, want the visible URI %s", got, greeting)
	}
	if got := readText(t, c, greeting); got != text {
		t.Errorf("read after the update = %q, want what touch_greeting made it: %q", got, text)
	}
	unsubscribe := func(uri string) {
		if err := c.Unsubscribe(ctx, mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: uri}}); err != nil {
			t.Fatalf("resources/unsubscribe %s: %v", uri, err)
		}
	}
	unsubscribe(greeting)
	testkit.Eventually(t, 30*time.Second, "the upstream listen narrowed to the blob", func() bool { return listened() == demo.BlobURI })
	unsubscribe(blob)
	testkit.Eventually(t, 30*time.Second, "the upstream listen ended", func() bool { return listened() == "" })
}

// readText is the text of uri's first content, read through c.
func readText(t *testing.T, c *client.Client, uri string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	if err != nil {
		t.Fatalf("resources/read %s: %v", uri, err)
	}
	if len(res.Contents) == 0 {
		t.Fatalf("resources/read %s: no contents", uri)
	}
	tc, _ := res.Contents[0].(mcp.TextResourceContents)
	return tc.Text
}
