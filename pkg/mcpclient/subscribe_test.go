package mcpclient_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

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
