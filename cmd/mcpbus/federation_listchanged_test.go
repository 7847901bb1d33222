package main_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
)

// TestUpstreamPromptsListChangedReachesClients: an upstream that adds a
// prompt at run time (the demo's toggle_prompt, called by alice through
// replica A) sends notifications/prompts/list_changed; bob's
// subscriptions/listen on replica B asking for promptsListChanged receives
// notifications/prompts/list_changed, and his next prompts/list has the
// new prompt; nobody reset the cache (the catalog generation is unchanged).
func TestUpstreamPromptsListChangedReachesClients(t *testing.T) {
	t.Parallel()
	st := startSubStack(t)
	alice := mcpClient(t, st.apiA, mcpAliceKey)
	initialized(t, alice, mcp.ProtocolVersion20251125)
	gen := restGeneration(t, st.apiB, mcpBobKey)

	bob := mcpClient(t, st.apiB, mcpBobKey)
	bobSeen := watchNotifications(bob)
	modernInitialized(t, bob)
	prompts := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := bob.ListPrompts(ctx, mcp.ListPromptsRequest{})
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		var names []string
		for _, p := range res.Prompts {
			names = append(names, p.Name)
		}
		return names
	}
	extra := "fed_" + demo.ExtraPrompt
	if slices.Contains(prompts(), extra) {
		t.Fatalf("%s listed before the upstream added it", extra)
	}
	stop, err := bob.ListenAsync(context.Background(), mcp.SubscriptionFilter{PromptsListChanged: true}, func(err error) { t.Logf("listen ended: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	bobSeen.await(t, "notifications/subscriptions/acknowledged")

	if text, isErr := callText(t, alice, "fed_"+demo.ToolTogglePrompt, nil); isErr || !strings.Contains(text, "added") {
		t.Fatalf("toggle_prompt: %q %v", text, isErr)
	}
	bobSeen.await(t, string(mcp.MethodNotificationPromptsListChanged))
	// The event follows the new catalog: the next list has the prompt.
	if names := prompts(); !slices.Contains(names, extra) {
		t.Fatalf("bob's prompts/list after list_changed lacks %s: %v", extra, names)
	}
	if after := restGeneration(t, st.apiB, mcpBobKey); after != gen {
		t.Errorf("catalog generation went from %d to %d: an upstream's list_changed is not a reset", gen, after)
	}
}
