package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpbus/mcpbus/examples/demoserver/demo"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// A call with CallOptions.Progress gets the server's notifications/progress for it,
// in order and without the token, and the result's _meta; a call whose
// ctx ends sends the server notifications/cancelled over streamable HTTP
// too (mcp-go's client does on stdio only), and the session stays usable.
func TestStreamableProgressAndCancel(t *testing.T) {
	t.Parallel()
	cancels := &demo.Cancellations{}
	s, err := demo.New(demo.Config{Cancellations: cancels})
	if err != nil {
		t.Fatal(err)
	}
	ts := newStreamableServer(t, cancels.Watch(server.NewStreamableHTTPServer(s)))
	// notifications/cancelled over HTTP belongs to the legacy era (TestEras
	// covers the modern one).
	c := connect(t, mcpclient.Spec{Server: "demo-http", Transport: mcpclient.TransportHTTP, URL: ts.URL + "/mcp", Era: mcpclient.EraLegacy})

	checkDemoProgress(t, c)

	// Without CallOptions.Progress no token is sent, so no progress either.
	if res := call(t, c, "progress", `{"steps":1}`, nil); text(t, res) != "done after 1 steps" {
		t.Errorf("progress without a token: %q", text(t, res))
	}

	bctx, bcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(bctx, "block", nil, nil)
		done <- err
	}()
	report := func() demo.CancellationReport {
		var r demo.CancellationReport
		if err := json.Unmarshal(call(t, c, "cancellations", "", nil).StructuredContent, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Cancel once the server runs the call.
	testkit.Eventually(t, 10*time.Second, "the block call to be in flight", func() bool {
		return cancels.InFlight() > 0
	})
	bcancel()
	if err := testkit.Receive(t, 60*time.Second, "the cancelled call to return", done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the server to receive notifications/cancelled", func() bool {
		r := report()
		return r.CancelNotifications == 1 && r.BlockedCancelled == 1
	})
}

// checkDemoProgress calls the demo server's progress tool with a progress
// handler: both notifications arrive, in order, before the result, whose
// _meta is the tool's alone.
func checkDemoProgress(t *testing.T, c *mcpclient.Client) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	progress := &mcpclient.CallOptions{Progress: func(p json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(p))
	}}
	res, err := c.CallTool(ctx, "progress", json.RawMessage(`{"steps":2}`), progress)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := []string{`{"message":"step 1 of 2","progress":1,"total":2}`, `{"message":"step 2 of 2","progress":2,"total":2}`}
	if !slices.Equal(got, want) {
		t.Errorf("progress = %q, want %q", got, want)
	}
	mu.Unlock()
	if string(res.Meta) != `{"demo/steps":2}` {
		t.Errorf("result _meta = %s, want the tool's alone", res.Meta)
	}
}
